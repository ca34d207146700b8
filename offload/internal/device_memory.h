// The small device interface behind which every CUDA call lives. Two implementations: CUDA
// (cuda_device_memory.cpp, compiled against CUDA::cudart when TIERZERO_HAVE_CUDA) and host
// memory (host_device_memory.cpp), chosen at run time by cudaGetDeviceCount.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/common.h"
#include "offload/offload.h"

namespace tierzero::offload {

// A copy engine queue: host-to-device and device-to-host copies each run on their own stream.
enum class Lane : uint8_t { kH2D = 0, kD2H = 1 };

// A point in a lane's queue (a CUDA event). Not shared between threads.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // Marks the point after everything queued on `lane` so far.
  virtual Status record(Lane lane) = 0;
  // Blocks the calling thread until the recorded point is reached (cudaEventSynchronize: only
  // this event, never the whole device). Ok at once when never recorded.
  virtual Status wait() = 0;
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // True for a CUDA GPU, false for host emulation.
  virtual bool is_gpu() const = 0;
  // "NVIDIA H200, 139.81 GiB, CUDA 13.0" or "host memory (no GPU: <reason>)".
  virtual std::string description() const = 0;
  // Page-locked host memory (2 MiB-aligned THP memory + cudaHostRegister; host emulation: mmap + mlock
  // when `lock`).
  virtual Result<void*> allocate_pinned(uint64_t bytes, bool lock) = 0;
  virtual void free_pinned(void* ptr, uint64_t bytes) = 0;

  // Queues a copy on `lane` (kH2D: host -> device, kD2H: device -> host). Host emulation copies
  // at once.
  virtual Status copy_async(Lane lane, void* dst, const void* src, uint64_t bytes) = 0;
  // A new event for this device.
  virtual Result<std::unique_ptr<DeviceEvent>> create_event() = 0;
};

// Returns the CUDA implementation when `choice` is kAuto, the build has CUDA and
// cudaGetDeviceCount finds a GPU (selecting `cuda_device`); else the host implementation, whose
// description says why.
Result<std::unique_ptr<DeviceMemory>> make_device_memory(DeviceChoice choice, int cuda_device);

// The host implementation (copies run when queued); `reason` is shown in its description.
std::unique_ptr<DeviceMemory> make_host_device_memory(std::string reason);

#ifdef TIERZERO_HAVE_CUDA
// Number of CUDA GPUs, or an error naming the CUDA error (no driver, no device).
Result<int> cuda_device_count();
// The CUDA implementation on `cuda_device`.
Result<std::unique_ptr<DeviceMemory>> make_cuda_device_memory(int cuda_device);
// CopyProbe::create on a machine with a GPU.
Result<std::unique_ptr<CopyProbe>> make_cuda_copy_probe(uint64_t bytes, int cuda_device);
#endif

}  // namespace tierzero::offload
