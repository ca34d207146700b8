// `tierzero bench tiers`: end-to-end streaming through the offload stack training runs on. A
// multi-GB set of records lives in swap files striped over the NVMe paths (offload's RecordStaging); it
// streams NVMe -> pinned staging (the same RecordStaging, the NVMe optimizer's record path) -> GPU on the
// side-stream copies (DeviceCopies, offload/torch/offload_torch.h), and GPU -> pinned -> NVMe,
// against min(NVMe bandwidth, PCIe bandwidth) measured in the same run. The staging buffers are a
// HostTier, pinned as training's. Without a GPU it streams NVMe -> pinned and back,
// against the NVMe bandwidth alone. LibTorch: run by tierzero-torch.
#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "offload/offload.h"
#include "offload/torch/offload_torch.h"
#include "tools/bench_io_target.h"
#include "tools/bench_tiers_peers.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

struct BenchTiersFlags {
  std::vector<std::string> paths;
  std::string size = "4GiB";
  std::string record = "64MiB";
  std::string gpu_budget = "1GiB";
  int buffers = 3;
  uint32_t queue_depth = 32;
  int device = 0;
  std::string json;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Word i of record k in generation g (1: written by the fill, 2: by the GPU -> NVMe stream): a
// value no other (generation, record, word) has.
uint64_t word(uint64_t generation, uint64_t record, uint64_t i) {
  return (generation << 56) ^ (record << 40) ^ i * 0x9E3779B97F4A7C15ull;
}

void fill_record(std::byte* data, uint64_t bytes, uint64_t generation, uint64_t record) {
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = word(generation, record, i / 8);
    std::memcpy(data + i, &v, 8);
  }
}

bool check_record(const std::byte* data, uint64_t bytes, uint64_t generation, uint64_t record) {
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = word(generation, record, i / 8);
    if (std::memcmp(data + i, &v, 8) != 0) return false;
  }
  return true;
}

class BenchTiers {
 public:
  explicit BenchTiers(const BenchTiersFlags& flags) : flags_(flags), report_("tierzero bench tiers") {}

  void run() {
    size_ = value_or_throw(parse_bytes(flags_.size));
    record_ = value_or_throw(parse_bytes(flags_.record));
    if (record_ == 0 || record_ % offload::RecordStaging::kRecordAlignment != 0 || size_ < record_)
      throw Error(invalid_argument("--record " + flags_.record +
                                   " must be a nonzero multiple of 4096 bytes and --size " + flags_.size +
                                   " at least one record"));
    if (flags_.buffers < 1 || flags_.buffers > 64)
      throw Error(invalid_argument("--buffers " + std::to_string(flags_.buffers) + " must be 1 .. 64 (3: triple)"));
    count_ = size_ / record_;
    size_ = count_ * record_;
    create_stack();
    begin_report();
    fill();
    // Each peer is measured next to the stream it is compared with, on the same swap files.
    const Bandwidth nvme_read = raw_nvme(false);
    const Bandwidth read = stream_in();
    const bool in_ok = verify_in();
    const Bandwidth write = stream_out();
    const bool out_ok = verify_out();
    const Bandwidth nvme_write = raw_nvme(true);  // overwrites the records: after verify_out()
    finish(nvme_read, read, in_ok, nvme_write, write, out_ok);
  }

 private:
  // The GPU (or the CPU without one), the pinned staging buffers, the swap files, the copies and,
  // with a GPU, a ring of device buffers of --gpu-budget bytes that the records land in.
  void create_stack() {
    gpu_ = at::hasCUDA() && flags_.device >= 0 && static_cast<size_t>(flags_.device) < at::getNumGPUs();
    device_ = gpu_ ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(flags_.device)) : at::Device(at::kCPU);
    std::vector<offload::PinnedBufferSpec> plan;  // the swap buffers of the optimizer's records
    for (int b = 0; b < flags_.buffers; ++b) plan.push_back({offload::PinnedRole::kOptimizerSwapBuffer, b, record_});
    host_ = offload::HostTier::create(plan, 0, device_, 0);
    std::vector<std::span<std::byte>> buffers;
    for (int b = 0; b < flags_.buffers; ++b) buffers.push_back({data(b), record_});
    std::vector<std::string> paths;
    const std::vector<std::string> asked = flags_.paths.empty() ? std::vector<std::string>{""} : flags_.paths;
    const uint64_t per_path = size_ / asked.size() + (64ull << 20);
    for (const std::string& p : asked) paths.push_back(value_or_throw(choose_bench_dir(p, per_path)));
    stem_ = "bench-tiers-" + std::to_string(getpid());
    io_.queue_depth = flags_.queue_depth;
    staging_ = value_or_throw(
        offload::RecordStaging::create(buffers, {.paths = paths,
                                                 .io = io_,
                                                 .rank = 0,
                                                 .records = static_cast<int64_t>(count_),
                                                 .record_bytes = record_,
                                                 .role = {stem_.c_str(), "--nvme", "record", "bench records"}}));
    if (!gpu_) return;
    copies_ = offload::DeviceCopies::create(device_, false);
    const uint64_t ring = std::max<uint64_t>(flags_.buffers, value_or_throw(parse_bytes(flags_.gpu_budget)) / record_);
    for (uint64_t i = 0; i < std::min(ring, count_); ++i)
      ring_.push_back(at::empty({static_cast<int64_t>(record_)}, at::TensorOptions().dtype(at::kByte).device(device_)));
  }

  std::byte* data(size_t b) const {
    return static_cast<std::byte*>(
        host_->buffer(offload::PinnedRole::kOptimizerSwapBuffer, at::kByte, static_cast<int>(b)).data_ptr());
  }
  size_t buffer_of(uint64_t k) const { return k % static_cast<size_t>(flags_.buffers); }

  void begin_report() {
    report_.param("stack", "offload/ as training runs it: " + host_->description() + "; swap files " +
                               staging_->describe() + "; " +
                               (gpu_ ? "side-stream copies on " + device_.str() : std::string("no GPU")));
    report_.param("set", std::to_string(count_) + " records x " + format_bytes(record_) + " = " + format_bytes(size_) +
                             ", striped over " + std::to_string(staging_->files().size()) + " path(s)" +
                             (gpu_ ? "; GPU ring " + format_bytes(ring_.size() * record_) : std::string()));
    report_.param("mode", gpu_ ? "NVMe -> pinned -> GPU and GPU -> pinned -> NVMe"
                               : "no GPU: NVMe -> pinned host and pinned -> NVMe, against NVMe alone");
    report_.param("pipeline", std::to_string(flags_.buffers) + " pinned staging buffers of one record (" +
                                  std::to_string(flags_.buffers - 1) + " reads ahead), aio queue depth " +
                                  std::to_string(flags_.queue_depth));
    report_.param("write pass", gpu_ ? "the GPU ring filled (untimed), then each ring's records copied to pinned and "
                                       "written to NVMe (timed): writes only, no reads"
                                     : "the staging buffers filled (untimed), then written (timed)");
    report_.param("GB/s", "1e9 bytes / s; ratio = tierzero / peer; peer = min(NVMe, PCIe) of the same direction");
    report_.begin({{"what", 22},
                   {"bytes", 10},
                   {"seconds", 8, 3},
                   {"GB/s", 7, 3},
                   {"peer_GB/s", 9, 3},
                   {"ratio", 6, 3},
                   {"verified", 8}});
  }

  // Untimed: every record gets its generation-1 pattern on NVMe.
  void fill() {
    ProgressBar bar("bench tiers: writing records", size_);
    for (uint64_t k = 0; k < count_; ++k) {
      const size_t b = buffer_of(k);
      throw_if_error(staging_->wait_write(b));
      fill_record(data(b), record_, 1, k);
      staging_->write(b, static_cast<int64_t>(k), 0, record_);
      bar.advance(record_);
    }
    finish_writes();
  }

  void finish_writes() {
    for (int b = 0; b < flags_.buffers; ++b) throw_if_error(staging_->wait_write(b));
  }

  // Timed: every record read into the staging buffers in turn, buffers - 1 reads ahead, and with a
  // GPU copied on to the ring; a buffer is read into again once its copy has run.
  Bandwidth stream_in() {
    std::vector<std::unique_ptr<offload::CopyDone>> copies(flags_.buffers);
    auto read = [&](uint64_t k) {
      const size_t b = buffer_of(k);
      if (copies[b]) copies[b]->wait_host();
      copies[b] = nullptr;
      staging_->read(b, static_cast<int64_t>(k), 0, record_);
    };
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t k = 0; k + 1 < static_cast<uint64_t>(flags_.buffers) && k < count_; ++k) read(k);
    for (uint64_t k = 0; k < count_; ++k) {
      const uint64_t ahead = k + flags_.buffers - 1;
      if (ahead < count_) read(ahead);
      const size_t b = buffer_of(k);
      throw_if_error(staging_->wait_read(b));
      if (gpu_) copies[b] = copies_->to_device(ring_[k % ring_.size()], data(b));
    }
    for (auto& copy : copies)
      if (copy) copy->wait_host();
    return {size_, seconds_since(start)};
  }

  // Untimed: the last records the in-stream left (in the GPU ring, else in the staging buffers) are
  // generation 1.
  bool verify_in() {
    bool ok = true;
    const uint64_t kept = gpu_ ? ring_.size() : std::min<uint64_t>(flags_.buffers, count_);
    for (uint64_t k = count_ - kept; k < count_; ++k) {
      std::byte* bytes = data(buffer_of(k));
      if (gpu_) copies_->to_host(bytes, ring_[k % ring_.size()])->wait_host();
      ok = ok && check_record(bytes, record_, 1, k);
    }
    return ok;
  }

  // Timed: groups of records written with their generation-2 pattern. With a GPU a group is the ring,
  // filled from the host (untimed), then each record copied to a staging buffer and written; without
  // one a group is the staging buffers, filled (untimed), then written.
  Bandwidth stream_out() {
    const uint64_t group = gpu_ ? ring_.size() : static_cast<uint64_t>(flags_.buffers);
    double seconds = 0;
    for (uint64_t first = 0; first < count_; first += group) {
      const uint64_t last = std::min(count_, first + group);
      for (uint64_t k = first; k < last; ++k) {
        std::byte* bytes = data(gpu_ ? 0 : buffer_of(k));
        fill_record(bytes, record_, 2, k);
        if (gpu_) copies_->to_device(ring_[k - first], bytes)->wait_host();
      }
      const auto start = std::chrono::steady_clock::now();
      for (uint64_t k = first; k < last; ++k) {
        const size_t b = buffer_of(k);
        if (gpu_) {
          throw_if_error(staging_->wait_write(b));
          copies_->to_host(data(b), ring_[k - first])->wait_host();
        }
        staging_->write(b, static_cast<int64_t>(k), 0, record_);
      }
      finish_writes();
      seconds += seconds_since(start);
    }
    return {size_, seconds};
  }

  // Untimed: every record read back from NVMe is generation 2.
  bool verify_out() {
    bool ok = true;
    for (uint64_t k = 0; k < count_; ++k) {
      staging_->read(0, static_cast<int64_t>(k), 0, record_);
      throw_if_error(staging_->wait_read(0));
      ok = ok && check_record(data(0), record_, 2, k);
    }
    return ok;
  }

  // The nvme/ engine alone over the first size/n bytes of each swap file, 8 record-sized requests in
  // flight each (capped at 8 MiB).
  Bandwidth raw_nvme(bool write) {
    const std::vector<std::string> files = staging_->files();
    std::unique_ptr<nvme::IoEngine> io = value_or_throw(nvme::IoEngine::create(io_));
    return value_or_throw(
        raw_nvme_bandwidth(*io, files, size_ / files.size(), std::min<uint64_t>(record_, 8ull << 20), 8, write));
  }

  void finish(const Bandwidth& nvme_read, const Bandwidth& in, bool in_ok, const Bandwidth& nvme_write,
              const Bandwidth& out, bool out_ok) {
    double read_peer = nvme_read.gbps(), write_peer = nvme_write.gbps();
    report_.row({"nvme read (raw)", format_bytes(nvme_read.bytes), nvme_read.seconds, nvme_read.gbps(),
                 nvme_read.gbps(), 1.0, "-"});
    report_.row({"nvme write (raw)", format_bytes(nvme_write.bytes), nvme_write.seconds, nvme_write.gbps(),
                 nvme_write.gbps(), 1.0, "-"});
    if (gpu_) {
      const uint64_t bytes = std::min<uint64_t>(size_, 1ull << 30);
      const Bandwidth h2d = value_or_throw(pcie_bandwidth(bytes, true, flags_.device));
      const Bandwidth d2h = value_or_throw(pcie_bandwidth(bytes, false, flags_.device));
      report_.row({"pcie h2d (cudaMemcpy)", format_bytes(h2d.bytes), h2d.seconds, h2d.gbps(), h2d.gbps(), 1.0, "OK"});
      report_.row({"pcie d2h (cudaMemcpy)", format_bytes(d2h.bytes), d2h.seconds, d2h.gbps(), d2h.gbps(), 1.0, "OK"});
      read_peer = std::min(read_peer, h2d.gbps());
      write_peer = std::min(write_peer, d2h.gbps());
    }
    report_.row({gpu_ ? "nvme -> gpu (tierzero)" : "nvme -> pinned (tz)", format_bytes(in.bytes), in.seconds, in.gbps(),
                 read_peer, in.gbps() / read_peer, in_ok ? "OK" : "FAIL"});
    report_.row({gpu_ ? "gpu -> nvme (tierzero)" : "pinned -> nvme (tz)", format_bytes(out.bytes), out.seconds,
                 out.gbps(), write_peer, out.gbps() / write_peer, out_ok ? "OK" : "FAIL"});
    char line[160];
    std::snprintf(line, sizeof line, "%.3fx min(NVMe read, PCIe H2D)%s (target 0.9): %s", in.gbps() / read_peer,
                  gpu_ ? "" : " (no GPU: NVMe read alone)", in.gbps() / read_peer >= 0.9 ? "met" : "NOT met");
    report_.summary(gpu_ ? "nvme -> gpu streaming" : "nvme -> pinned streaming", line);
    std::snprintf(line, sizeof line, "%.3fx min(NVMe write, PCIe D2H)%s", out.gbps() / write_peer,
                  gpu_ ? "" : " (no GPU: NVMe write alone)");
    report_.summary(gpu_ ? "gpu -> nvme streaming" : "pinned -> nvme streaming", line);
    report_.summary("verification", gpu_ ? "the records left in the GPU ring by the read stream, and every record "
                                           "read back from NVMe after the write stream, match their patterns"
                                         : "the records left in the staging buffers by the read stream, and every "
                                           "record read back from NVMe after the write stream, match their patterns");
    report_.end(in_ok && out_ok);
    if (!flags_.json.empty()) throw_if_error(report_.write_json(flags_.json));
    if (!in_ok || !out_ok) throw ExitCode{1};
  }

  const BenchTiersFlags& flags_;
  BenchReport report_;
  uint64_t size_ = 0, record_ = 0, count_ = 0;
  bool gpu_ = false;
  at::Device device_{at::kCPU};
  nvme::IoConfig io_;
  std::string stem_;  // the swap files' stem: tierzero-bench-tiers-<pid>-r0.swap
  std::unique_ptr<offload::HostTier> host_;
  std::unique_ptr<offload::RecordStaging> staging_;  // after host_: its buffers outlive it
  std::unique_ptr<offload::DeviceCopies> copies_;
  std::vector<at::Tensor> ring_;
};

}  // namespace

void add_bench_tiers_command(CLI::App& bench) {
  auto flags = std::make_shared<BenchTiersFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "tiers", "End-to-end NVMe -> GPU and GPU -> NVMe streaming through training's offload stack vs min(NVMe, PCIe)");
  cmd->add_option("--nvme,--path", flags->paths,
                  "NVMe directory; repeat to stripe over several (default: current dir or /tmp); --path is the "
                  "older name of --nvme, kept as an alias");
  cmd->add_option("--size", flags->size, "Bytes in the record set (default 4GiB)");
  cmd->add_option("--record,--shard", flags->record,
                  "Bytes per record, a multiple of 4096 (default 64MiB); --shard is the older name");
  cmd->add_option("--gpu-budget", flags->gpu_budget, "GPU ring the records land in (default 1GiB)");
  cmd->add_option("--buffers,--depth", flags->buffers,
                  "Pinned staging buffers of one record each (default 3); --depth is the older name")
      ->check(whole_number_in(1, 1024));
  cmd->add_option("--queue-depth", flags->queue_depth, "aio requests in flight per ring (default 32)")
      ->check(whole_number_in(1, 4096));
  cmd->add_option("--device", flags->device, "CUDA device (default 0)")->check(whole_number_in(0, 1023));
  cmd->add_option("--json", flags->json, "Also write the results as JSON to this file");
  cmd->callback([flags] { BenchTiers(*flags).run(); });
}

}  // namespace tierzero::tools
