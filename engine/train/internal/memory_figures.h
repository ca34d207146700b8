// Private: the memory a step used, measured, not estimated (memory_figures.cpp).
//   gpu_peak_bytes      the CUDA caching allocator's peak of allocated bytes since the step began
//                       (reset_step_peaks() at its start); -1 on the CPU
//   gpu_reserved_bytes  the allocator's peak of reserved (cached) bytes over the same span; -1 on the CPU
//   pinned_bytes        page-locked host memory the engine holds (optimizer state, parameter shards) and a
//                       LoRA run's frozen base when it is pinned
//   pageable_bytes      the process's resident set (/proc/self/statm) minus pinned_bytes: LibTorch,
//                       the data, the model as loaded, and any host state that is not pinned
//   nvme_bytes          swap files on NVMe (the optimizer state with offload_optimizer.device "nvme"; else 0)
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

namespace tierzero::engine {
class ZeroEngine;
}

namespace tierzero::engine::trainer {

struct MemoryFigures {
  int64_t gpu_peak_bytes = -1;
  int64_t gpu_reserved_bytes = -1;
  int64_t pinned_bytes = 0;
  int64_t pageable_bytes = 0;
  int64_t nvme_bytes = 0;
};

// Starts a new peak window on `device` (CUDA's resetPeakStats); nothing on the CPU.
void reset_step_peaks(at::Device device);

// The figures now, the GPU ones being the peaks since reset_step_peaks(). `model_pinned_bytes` and
// `model_nvme_bytes`: page-locked memory and swap-file bytes the model holds beside the engine's (a
// LoRA run's frozen base in pinned memory, or on NVMe with its pinned staging).
MemoryFigures measure_memory(at::Device device, ZeroEngine& engine, int64_t model_pinned_bytes,
                             int64_t model_nvme_bytes);

// The larger of each field (a run's peaks from its steps').
MemoryFigures max_of(const MemoryFigures& a, const MemoryFigures& b);

}  // namespace tierzero::engine::trainer
