// `tierzero bench tiers`: end-to-end streaming through the tier manager. A multi-GB set of
// NVMe-homed shards streams NVMe -> GPU (fetch in order, the recorded trace prefetching ahead)
// and GPU -> NVMe (writeback), against min(NVMe bandwidth, PCIe bandwidth) measured in the same
// run. Without a GPU it streams NVMe -> pinned host memory against the NVMe bandwidth alone.
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>

#include "common/common.h"
#include "offload/tier_manager.h"
#include "tools/bench_io_target.h"
#include "tools/bench_tiers_peers.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

using offload::Access;
using offload::Tier;

struct BenchTiersFlags {
  std::vector<std::string> paths;
  std::string size = "4GiB";
  std::string shard = "64MiB";
  std::string gpu_budget = "1GiB";
  std::string chunk = "8MiB";
  uint32_t depth = 3;
  uint32_t threads = 4;
  int device = 0;
  std::string json;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Word i of shard s: a value no other (shard, word) has.
void fill_shard(std::byte* data, uint64_t bytes, uint64_t shard) {
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = (shard << 40) ^ (i / 8) * 0x9E3779B97F4A7C15ull;
    std::memcpy(data + i, &v, 8);
  }
}

bool check_shard(const std::byte* data, uint64_t bytes, uint64_t shard) {
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = (shard << 40) ^ (i / 8) * 0x9E3779B97F4A7C15ull;
    if (std::memcmp(data + i, &v, 8) != 0) return false;
  }
  return true;
}

class BenchTiers {
 public:
  explicit BenchTiers(const BenchTiersFlags& flags) : flags_(flags), report_("tierzero bench tiers") {}

  void run() {
    size_ = value_or_throw(parse_bytes(flags_.size));
    shard_ = value_or_throw(parse_bytes(flags_.shard));
    if (shard_ == 0 || size_ < shard_)
      throw Error(invalid_argument("--shard must be > 0 and --size at least one shard"));
    count_ = size_ / shard_;
    size_ = count_ * shard_;
    create_manager();
    target_ = tm_->gpu_is_device() ? Tier::kGpu : Tier::kPinned;
    begin_report();
    fill();
    record_trace();
    // Each peer is measured next to the stream it is compared with, on the same swap files.
    const Bandwidth nvme_read = raw_nvme(false);
    const Bandwidth read = stream_in();
    const Bandwidth write = stream_out();
    const bool verified = verify();
    const Bandwidth nvme_write = raw_nvme(true);  // overwrites the shards: after verify()
    finish(nvme_read, read, nvme_write, write, verified);
  }

 private:
  void create_manager() {
    std::vector<std::string> paths = flags_.paths;
    if (paths.empty()) paths.push_back("");
    offload::TierBudgets b;
    b.chunk_bytes = value_or_throw(parse_bytes(flags_.chunk));
    b.pipeline_depth = flags_.depth;
    b.transfer_threads = flags_.threads;
    b.nvme_bytes = size_ + size_ / 16 + uint64_t{paths.size()} * b.stripe_bytes;
    for (const std::string& p : paths)
      b.nvme_paths.push_back(value_or_throw(choose_bench_dir(p, b.nvme_bytes / paths.size())));
    b.swap_file_prefix = "tierzero-bench-tiers-" + std::to_string(getpid());
    b.io.queue_depth = 32;
    cache_ = value_or_throw(parse_bytes(flags_.gpu_budget));
    const uint64_t staging = uint64_t{b.transfer_threads} * b.pipeline_depth * b.chunk_bytes;
    probe_gpu_ = offload::CopyProbe::create(1 << 20, flags_.device).ok();
    b.gpu_bytes = probe_gpu_ ? cache_ : 0;
    b.pinned_bytes = staging + (probe_gpu_ ? 2 * shard_ : cache_);
    b.pinned_arena_bytes = std::max<uint64_t>(b.chunk_bytes, 256ull << 20);
    b.prefetch_bytes = cache_ / 2;
    b.cuda_device = flags_.device;
    budgets_ = b;
    io_ = value_or_throw(nvme::IoEngine::create(b.io));
    tm_ = value_or_throw(offload::TierManager::create(b, io_.get()));
  }

  std::string id(uint64_t i) const { return "bench/shard" + std::to_string(i); }

  void begin_report() {
    std::string tiers = tm_->budget_statement();
    for (char& c : tiers) c = c == '\n' ? ';' : c;
    report_.param("tiers", tiers);
    report_.param("set", std::to_string(count_) + " shards x " + format_bytes(shard_) + " = " + format_bytes(size_) +
                             ", home NVMe; " + offload::tier_name(target_) + " cache " + format_bytes(cache_));
    report_.param("mode", target_ == Tier::kGpu ? "NVMe -> GPU and GPU -> NVMe"
                                                : "no GPU: NVMe -> pinned host and pinned -> NVMe, against NVMe alone");
    report_.param("pipeline", format_bytes(budgets_.chunk_bytes) + " chunks, depth " +
                                  std::to_string(budgets_.pipeline_depth) + ", " +
                                  std::to_string(budgets_.transfer_threads) + " transfers at once, prefetch " +
                                  format_bytes(budgets_.prefetch_bytes) + " ahead by the recorded trace");
    report_.param("write pass",
                  "fetched for writing in groups of half the cache (untimed, no read-ahead), "
                  "then each group written back at once (timed): writebacks only, no reads");
    report_.param("GB/s", "1e9 bytes / s; ratio = tierzero / peer; peer = min(NVMe, PCIe) of the same direction");
    report_.begin({{"what", 22},
                   {"bytes", 10},
                   {"seconds", 8, 3},
                   {"GB/s", 7, 3},
                   {"peer_GB/s", 9, 3},
                   {"ratio", 6, 3},
                   {"verified", 8}});
  }

  // Untimed: every shard gets its pattern on NVMe.
  void fill() {
    ProgressBar bar("bench tiers: writing shards", size_);
    for (uint64_t i = 0; i < count_; ++i) {
      throw_if_error(tm_->register_shard({id(i), shard_, ElementType::kBF16, Tier::kNvme}));
      offload::ShardView v = value_or_throw(tm_->fetch(id(i), Tier::kPinned, Access::kWrite).get());
      fill_shard(static_cast<std::byte*>(v.data), shard_, i);
      throw_if_error(tm_->release(id(i)).get());
      throw_if_error(tm_->evict(id(i), Tier::kPinned).get());
      bar.advance(shard_);
    }
  }

  // Untimed: one pass in order records the trace (a training step's first iteration).
  void record_trace() {
    tm_->begin_trace();
    for (uint64_t i = 0; i < count_; ++i) {
      throw_if_error(tm_->fetch(id(i), target_).get().status());
      throw_if_error(tm_->release(id(i)).get());
    }
    tm_->end_trace();
    drop_cached();
  }

  void drop_cached() {
    for (uint64_t i = 0; i < count_; ++i) throw_if_error(tm_->evict(id(i), target_).get());
  }

  // Timed: fetch every shard in order; the trace keeps prefetch_bytes in flight ahead.
  Bandwidth stream_in() {
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t i = 0; i < count_; ++i) {
      throw_if_error(tm_->fetch(id(i), target_).get().status());
      throw_if_error(tm_->release(id(i)).get());
    }
    return {size_, seconds_since(start)};
  }

  // Timed: groups that fit the cache are fetched for writing (untimed), then written back
  // together (timed). The write pass replays no trace: each untimed fetch would queue the read-ahead
  // of the next group, which then ran inside the timed writebacks (on the CI box 190 MiB of reads
  // beside every 512 MiB written), work the raw writer it is compared with does not do.
  // begin_trace() stops the replay; drop_cached() then waits for read-ahead already queued.
  Bandwidth stream_out() {
    tm_->begin_trace();
    drop_cached();
    const uint64_t group = std::max<uint64_t>(1, cache_ / shard_ / 2);
    double seconds = 0;
    for (uint64_t first = 0; first < count_; first += group) {
      const uint64_t last = std::min(count_, first + group);
      for (uint64_t i = first; i < last; ++i) throw_if_error(tm_->fetch(id(i), target_, Access::kWrite).get().status());
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::future<Status>> writes;
      for (uint64_t i = first; i < last; ++i) writes.push_back(tm_->writeback(id(i)));
      for (auto& w : writes) throw_if_error(w.get());
      seconds += seconds_since(start);
      for (uint64_t i = first; i < last; ++i) {
        throw_if_error(tm_->release(id(i)).get());
        throw_if_error(tm_->evict(id(i), target_).get());
      }
    }
    return {size_, seconds};
  }

  // Untimed: every shard read back from NVMe into pinned memory matches its pattern, so both
  // streams moved the right bytes.
  bool verify() {
    bool ok = true;
    for (uint64_t i = 0; i < count_; ++i) {
      offload::ShardView v = value_or_throw(tm_->fetch(id(i), Tier::kPinned).get());
      ok = ok && check_shard(static_cast<const std::byte*>(v.data), shard_, i);
      throw_if_error(tm_->release(id(i)).get());
      throw_if_error(tm_->evict(id(i), Tier::kPinned).get());
    }
    return ok;
  }

  // The nvme/ engine alone over the first size/n bytes of each swap file, 8 chunks in flight each.
  Bandwidth raw_nvme(bool write) {
    std::vector<std::string> files;
    const std::vector<offload::NvmeShardRecord> manifest = tm_->nvme_manifest();
    for (const offload::NvmeExtentPart& part : manifest.front().parts) files.push_back(part.file);
    return value_or_throw(raw_nvme_bandwidth(*io_, files, size_ / files.size(), budgets_.chunk_bytes, 8, write));
  }

  void finish(const Bandwidth& nvme_read, const Bandwidth& in, const Bandwidth& nvme_write, const Bandwidth& out,
              bool verified) {
    double read_peer = nvme_read.gbps(), write_peer = nvme_write.gbps();
    report_.row({"nvme read (raw)", format_bytes(nvme_read.bytes), nvme_read.seconds, nvme_read.gbps(),
                 nvme_read.gbps(), 1.0, "-"});
    report_.row({"nvme write (raw)", format_bytes(nvme_write.bytes), nvme_write.seconds, nvme_write.gbps(),
                 nvme_write.gbps(), 1.0, "-"});
    if (target_ == Tier::kGpu) {
      const uint64_t bytes = std::min<uint64_t>(size_, 1ull << 30);
      const Bandwidth h2d = value_or_throw(pcie_bandwidth(bytes, true, flags_.device));
      const Bandwidth d2h = value_or_throw(pcie_bandwidth(bytes, false, flags_.device));
      report_.row({"pcie h2d (cudaMemcpy)", format_bytes(h2d.bytes), h2d.seconds, h2d.gbps(), h2d.gbps(), 1.0, "OK"});
      report_.row({"pcie d2h (cudaMemcpy)", format_bytes(d2h.bytes), d2h.seconds, d2h.gbps(), d2h.gbps(), 1.0, "OK"});
      read_peer = std::min(read_peer, h2d.gbps());
      write_peer = std::min(write_peer, d2h.gbps());
    }
    const bool gpu = target_ == Tier::kGpu;
    const char* verdict = verified ? "OK" : "FAIL";
    report_.row({gpu ? "nvme -> gpu (tierzero)" : "nvme -> pinned (tz)", format_bytes(in.bytes), in.seconds, in.gbps(),
                 read_peer, in.gbps() / read_peer, verdict});
    report_.row({gpu ? "gpu -> nvme (tierzero)" : "pinned -> nvme (tz)", format_bytes(out.bytes), out.seconds,
                 out.gbps(), write_peer, out.gbps() / write_peer, verdict});
    char line[160];
    std::snprintf(line, sizeof line, "%.3fx min(NVMe read, PCIe H2D)%s (target 0.9): %s", in.gbps() / read_peer,
                  gpu ? "" : " (no GPU: NVMe read alone)", in.gbps() / read_peer >= 0.9 ? "met" : "NOT met");
    report_.summary(gpu ? "nvme -> gpu streaming" : "nvme -> pinned streaming", line);
    std::snprintf(line, sizeof line, "%.3fx min(NVMe write, PCIe D2H)%s", out.gbps() / write_peer,
                  gpu ? "" : " (no GPU: NVMe write alone)");
    report_.summary(gpu ? "gpu -> nvme streaming" : "pinned -> nvme streaming", line);
    report_.summary("verification", "every shard read back from NVMe after both streams matches its pattern");
    report_.end(verified);
    if (!flags_.json.empty()) throw_if_error(report_.write_json(flags_.json));
    if (!verified) throw ExitCode{1};
  }

  const BenchTiersFlags& flags_;
  BenchReport report_;
  uint64_t size_ = 0, shard_ = 0, count_ = 0, cache_ = 0;
  bool probe_gpu_ = false;
  offload::TierBudgets budgets_;
  std::unique_ptr<nvme::IoEngine> io_;
  std::unique_ptr<offload::TierManager> tm_;
  Tier target_ = Tier::kPinned;
};

}  // namespace

void add_bench_tiers_command(CLI::App& bench) {
  auto flags = std::make_shared<BenchTiersFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "tiers", "End-to-end NVMe -> GPU and GPU -> NVMe streaming of a multi-GB shard set vs min(NVMe, PCIe) bandwidth");
  cmd->add_option("--nvme,--path", flags->paths,
                  "NVMe directory; repeat to stripe over several (default: current dir or /tmp); --path is the "
                  "older name of --nvme, kept as an alias");
  cmd->add_option("--size", flags->size, "Bytes in the shard set (default 4GiB)");
  cmd->add_option("--shard", flags->shard, "Bytes per shard (default 64MiB)");
  cmd->add_option("--gpu-budget", flags->gpu_budget,
                  "GPU tier budget (host cache without a GPU), below --size (default 1GiB)");
  cmd->add_option("--chunk", flags->chunk, "Pipeline chunk (default 8MiB)");
  cmd->add_option("--depth", flags->depth, "Staging buffers per pipeline (default 3)");
  cmd->add_option("--threads", flags->threads, "Transfers at once (default 4)");
  cmd->add_option("--device", flags->device, "CUDA device (default 0)");
  cmd->add_option("--json", flags->json, "Also write the results as JSON to this file");
  cmd->callback([flags] { BenchTiers(*flags).run(); });
}

}  // namespace tierzero::tools
