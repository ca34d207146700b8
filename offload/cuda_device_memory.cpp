// A CUDA device behind DeviceMemory: pinned arenas registered with it, its own non-blocking streams
// for H2D and D2H copies, events for order.
#include <cuda_runtime.h>

#include <algorithm>
#include <new>

#include "common/common.h"
#include "nvme/io_engine.h"
#include "offload/internal/device_memory.h"

namespace tierzero::offload {
namespace {

Status cuda_status(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return {};
  return internal_error(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

class CudaEvent final : public DeviceEvent {
 public:
  CudaEvent(int device, cudaEvent_t event, const cudaStream_t* lanes) : device_(device), event_(event), lanes_(lanes) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }

  Status record(Lane lane) override {
    cudaSetDevice(device_);
    recorded_ = true;
    return cuda_status(cudaEventRecord(event_, lanes_[static_cast<int>(lane)]), "cudaEventRecord");
  }
  Status wait() override {
    if (!recorded_) return {};
    return cuda_status(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }

 private:
  int device_;
  cudaEvent_t event_;
  const cudaStream_t* lanes_;
  bool recorded_ = false;
};

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {}
  ~CudaDeviceMemory() override {
    cudaSetDevice(device_);
    for (cudaStream_t s : lanes_) {
      if (s) cudaStreamDestroy(s);
    }
  }

  Status init() {
    TZ_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")"));
    for (cudaStream_t& s : lanes_) {
      TZ_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    }
    cudaDeviceProp prop{};
    TZ_RETURN_IF_ERROR(cuda_status(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties"));
    int runtime = 0;
    cudaRuntimeGetVersion(&runtime);
    description_ = std::string(prop.name) + " (device " + std::to_string(device_) + ", " +
                   format_bytes(prop.totalGlobalMem) + ", PCI " + std::to_string(prop.pciBusID) + "), CUDA runtime " +
                   std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
    return {};
  }

  bool is_gpu() const override { return true; }
  std::string description() const override { return description_; }
  // Pinned memory on 2 MiB-aligned transparent huge pages, registered with CUDA (cudaHostRegister)
  // rather than cudaHostAlloc'ed: the same DMA for copies, and an NVMe request into it is a few
  // physically contiguous segments instead of one per 4 KiB page (nvme::allocate_aligned; a 1 MiB
  // request on 4 KiB pages is split at the disk's max_segments). Where THP is off the memory stays on
  // 4 KiB pages and works the same.
  Result<void*> allocate_pinned(uint64_t bytes, bool) override {
    cudaSetDevice(device_);
    std::byte* p = nullptr;
    try {
      p = nvme::allocate_aligned(std::max<uint64_t>(bytes, nvme::kHugeBufferAlign)).release();
    } catch (const std::bad_alloc&) {
      return resource_exhausted("cannot allocate a " + format_bytes(bytes) +
                                " pinned arena: out of host memory; lower pinned_bytes or free host memory");
    }
    const cudaError_t err = cudaHostRegister(p, bytes, cudaHostRegisterPortable);
    if (err != cudaSuccess) {
      nvme::AlignedFree{}(p);
      return resource_exhausted("cudaHostRegister of a " + format_bytes(bytes) + " pinned arena failed (" +
                                cudaGetErrorName(err) + "): lower pinned_bytes or free host memory");
    }
    return static_cast<void*>(p);
  }
  void free_pinned(void* ptr, uint64_t) override {
    cudaSetDevice(device_);
    cudaHostUnregister(ptr);
    nvme::AlignedFree{}(ptr);
  }

  Status copy_async(Lane lane, void* dst, const void* src, uint64_t bytes) override {
    cudaSetDevice(device_);
    const cudaMemcpyKind kind = lane == Lane::kH2D ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    return cuda_status(cudaMemcpyAsync(dst, src, bytes, kind, lanes_[static_cast<int>(lane)]), "cudaMemcpyAsync");
  }
  Result<std::unique_ptr<DeviceEvent>> create_event() override {
    cudaSetDevice(device_);
    cudaEvent_t e = nullptr;
    // Blocking sync: a waiting thread sleeps instead of spinning a core.
    TZ_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&e, cudaEventBlockingSync), "cudaEventCreate"));
    return std::unique_ptr<DeviceEvent>(std::make_unique<CudaEvent>(device_, e, lanes_));
  }

 private:
  int device_;
  cudaStream_t lanes_[2] = {nullptr, nullptr};
  std::string description_;
};

}  // namespace

Result<int> cuda_device_count() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    return unsupported(std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                       ")");
  }
  return count;
}

Result<std::unique_ptr<DeviceMemory>> make_cuda_device_memory(int cuda_device) {
  auto memory = std::make_unique<CudaDeviceMemory>(cuda_device);
  TZ_RETURN_IF_ERROR(memory->init());
  return std::unique_ptr<DeviceMemory>(std::move(memory));
}

}  // namespace tierzero::offload
