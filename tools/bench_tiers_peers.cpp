#include "tools/bench_tiers_peers.h"

#include <chrono>
#include <cstring>
#include <deque>

#include "offload/torch/offload_torch.h"

namespace tierzero::tools {

Result<Bandwidth> raw_nvme_bandwidth(nvme::IoEngine& io, const std::vector<std::string>& paths, uint64_t bytes_per_file,
                                     uint64_t chunk, uint32_t in_flight, bool write) {
  std::vector<nvme::FileRef> files;
  for (const std::string& path : paths) {
    nvme::OpenOptions options;
    options.mode = write ? nvme::OpenMode::kReadWrite : nvme::OpenMode::kRead;
    Result<nvme::FileRef> file = io.open(path, options);
    if (!file.ok()) return file.status();
    files.push_back(*file);
  }
  const uint64_t slots = uint64_t{in_flight} * files.size();
  nvme::AlignedBuffer buffer = nvme::allocate_aligned(slots * chunk);
  if (write) std::memset(buffer.get(), 0xA5, slots * chunk);
  (void)io.register_buffer(buffer.get(), slots * chunk);  // a speed-up where the backend has it
  struct Pending {
    nvme::IoTicket ticket;
    uint64_t slot;
  };
  std::deque<Pending> pending;
  std::vector<uint64_t> next(files.size(), 0);
  Status status;
  const auto start = std::chrono::steady_clock::now();
  uint64_t issued_slot = 0;
  auto issue = [&](uint64_t slot) {
    for (size_t k = 0; k < files.size(); ++k) {
      const size_t f = (issued_slot + k) % files.size();
      if (next[f] >= bytes_per_file) continue;
      const uint64_t n = std::min(chunk, bytes_per_file - next[f]);
      pending.push_back({io.submit({files[f], write ? nvme::Op::kWrite : nvme::Op::kRead, next[f],
                                    buffer.get() + slot * chunk, n, false}),
                         slot});
      next[f] += n;
      ++issued_slot;
      return;
    }
  };
  for (uint64_t slot = 0; slot < slots; ++slot) issue(slot);
  while (!pending.empty()) {
    Pending p = pending.front();
    pending.pop_front();
    Status s = p.ticket.wait();
    if (status.ok() && !s.ok()) status = s;
    if (status.ok()) issue(p.slot);
  }
  if (write) {
    for (const nvme::FileRef& f : files) {
      Status s = f->sync();
      if (status.ok() && !s.ok()) status = s;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  (void)io.unregister_buffer(buffer.get());
  TZ_RETURN_IF_ERROR(status);
  return Bandwidth{bytes_per_file * files.size(), seconds};
}

Result<Bandwidth> pcie_bandwidth(uint64_t bytes, bool h2d, int cuda_device) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<offload::CopyProbe> probe, offload::CopyProbe::create(bytes, cuda_device));
  TZ_ASSIGN_OR_RETURN(
      offload::CopyMeasurement m,
      probe->measure(h2d ? offload::CopyDirection::kH2D : offload::CopyDirection::kD2H,
                     offload::HostMemoryKind::kPinned, offload::CopyMethod::kCudaMemcpy, 64ull << 20, 3));
  if (!m.verified) return internal_error("the PCIe peer measurement copied wrong bytes");
  return Bandwidth{m.bytes, m.seconds};
}

}  // namespace tierzero::tools
