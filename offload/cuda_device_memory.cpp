// A CUDA device behind DeviceMemory: pinned arenas registered with it.
#include <cuda_runtime.h>

#include <algorithm>
#include <new>

#include "common/common.h"
#include "nvme/io_engine.h"
#include "offload/internal/device_memory.h"

namespace tierzero::offload {

Status cuda_status(int error, const std::string& what) {
  if (error == cudaSuccess) return {};
  const auto err = static_cast<cudaError_t>(error);
  return internal_error(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

namespace {

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(device) {}

  Status init() {
    TZ_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")"));
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
  // 4 KiB pages and works the same. The pages are faulted in on every core first (touch_in_parallel):
  // cudaHostRegister would fault them one by one on this thread, and then only pins them.
  Result<void*> allocate_pinned(uint64_t bytes, bool) override {
    cudaSetDevice(device_);
    std::byte* p = nullptr;
    try {
      p = nvme::allocate_aligned(std::max<uint64_t>(bytes, nvme::kHugeBufferAlign)).release();
    } catch (const std::bad_alloc&) {
      return resource_exhausted("cannot allocate a " + format_bytes(bytes) +
                                " pinned arena: out of host memory; lower pinned_bytes or free host memory");
    }
    touch_in_parallel(p, bytes);
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

 private:
  int device_;
  std::string description_;
};

}  // namespace

Result<int> cuda_device_count() {
  int count = 0;
  const Status status = cuda_status(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (!status.ok()) return unsupported(status.message());
  return count;
}

Result<std::unique_ptr<DeviceMemory>> make_cuda_device_memory(int cuda_device) {
  auto memory = std::make_unique<CudaDeviceMemory>(cuda_device);
  TZ_RETURN_IF_ERROR(memory->init());
  return std::unique_ptr<DeviceMemory>(std::move(memory));
}

}  // namespace tierzero::offload
