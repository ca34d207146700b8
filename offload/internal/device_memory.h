// The memory behind PinnedHostPool's arena. Two implementations: CUDA (cuda_device_memory.cpp,
// compiled against CUDA::cudart when TIERZERO_HAVE_CUDA: host memory registered with the GPU) and
// host memory (host_device_memory.cpp), chosen at run time by cudaGetDeviceCount. Copies to and from
// the GPU are DeviceCopies' (offload/torch/offload_torch.h), not this interface's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/common.h"
#include "offload/offload.h"

namespace tierzero::offload {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // True for a CUDA GPU, false for host emulation.
  virtual bool is_gpu() const = 0;
  // "NVIDIA H200, 139.81 GiB, CUDA 13.0" or "host memory (no GPU: <reason>)".
  virtual std::string description() const = 0;
  // Page-locked host memory (2 MiB-aligned THP memory + cudaHostRegister; host emulation: mmap + mlock
  // when `lock`), zero-filled and faulted in on every core (touch_in_parallel) before it returns.
  virtual Result<void*> allocate_pinned(uint64_t bytes, bool lock) = 0;
  virtual void free_pinned(void* ptr, uint64_t bytes) = 0;
};

// Returns the CUDA implementation when `choice` is kAuto, the build has CUDA and
// cudaGetDeviceCount finds a GPU (selecting `cuda_device`); else the host implementation, whose
// description says why.
Result<std::unique_ptr<DeviceMemory>> make_device_memory(DeviceChoice choice, int cuda_device);

// Writes zeros over [data, data + bytes) on every allowed core, a slice each: the first touch of
// freshly mapped memory (the kernel zeroing its pages, huge pages where THP gives them) in parallel
// rather than page by page inside one thread, as cudaHostRegister would fault it in.
void touch_in_parallel(void* data, uint64_t bytes);

// The host implementation; `reason` is shown in its description.
std::unique_ptr<DeviceMemory> make_host_device_memory(std::string reason);

#ifdef TIERZERO_HAVE_CUDA
// Number of CUDA GPUs, or an error naming the CUDA error (no driver, no device).
Result<int> cuda_device_count();
// The CUDA implementation on `cuda_device`.
Result<std::unique_ptr<DeviceMemory>> make_cuda_device_memory(int cuda_device);
#endif

}  // namespace tierzero::offload
