#include "engine/train/internal/memory_figures.h"

#ifdef TIERZERO_ENGINE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "engine/zero/zero_engine.h"

namespace tierzero::engine::trainer {
namespace {

// The process's resident set in bytes (/proc/self/statm's second field, in pages); 0 where unreadable.
int64_t resident_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  long long size_pages = 0, resident_pages = 0;
  const int read = std::fscanf(statm, "%lld %lld", &size_pages, &resident_pages);
  std::fclose(statm);
  return read == 2 ? resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

void reset_step_peaks(at::Device device) {
#ifdef TIERZERO_ENGINE_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#else
  (void)device;
#endif
}

MemoryFigures measure_memory(at::Device device, ZeroEngine& engine, int64_t model_pinned_bytes,
                             int64_t model_nvme_bytes) {
  MemoryFigures m;
#ifdef TIERZERO_ENGINE_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    const auto aggregate = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    m.gpu_peak_bytes = stats.allocated_bytes[aggregate].peak;
    m.gpu_reserved_bytes = stats.reserved_bytes[aggregate].peak;
  }
#else
  (void)device;
#endif
  m.pinned_bytes = engine.pinned_bytes() + model_pinned_bytes;
  m.pageable_bytes = std::max<int64_t>(0, resident_bytes() - m.pinned_bytes);
  m.nvme_bytes = static_cast<int64_t>(engine.nvme_traffic().resident_bytes) + model_nvme_bytes;
  return m;
}

MemoryFigures max_of(const MemoryFigures& a, const MemoryFigures& b) {
  return {std::max(a.gpu_peak_bytes, b.gpu_peak_bytes), std::max(a.gpu_reserved_bytes, b.gpu_reserved_bytes),
          std::max(a.pinned_bytes, b.pinned_bytes), std::max(a.pageable_bytes, b.pageable_bytes),
          std::max(a.nvme_bytes, b.nvme_bytes)};
}

}  // namespace tierzero::engine::trainer
