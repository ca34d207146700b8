// Device queues (offload_torch.h): a CUDA stream of the queue's own, or, on a CPU "device", the work
// done in the call.
#include <cstring>
#include <utility>

#include "offload/torch/offload_torch.h"

#ifdef TIERZERO_OFFLOAD_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace tierzero::offload {
namespace {

// Everything a CPU "device" queued has run when queued.
class HostMark final : public QueueMark {
 public:
  void wait_host() override {}
  void order_current_stream() override {}
  double seconds() override { return 0.0; }
  bool ran() override { return true; }
};

class HostQueue final : public DeviceQueue {
 public:
  void to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  Status launch(const std::function<Status(void* stream)>& enqueue) override { return enqueue(nullptr); }
  std::unique_ptr<QueueMark> mark() override { return std::make_unique<HostMark>(); }
};

#ifdef TIERZERO_OFFLOAD_CUDA

class CudaMark final : public QueueMark {
 public:
  CudaMark(cudaEvent_t event, int device) : event_(event), device_(device) {}
  ~CudaMark() override { cudaEventDestroy(event_); }
  CudaMark(const CudaMark&) = delete;
  CudaMark& operator=(const CudaMark&) = delete;
  void wait_host() override { throw_if_error(cuda_status(cudaEventSynchronize(event_), "cudaEventSynchronize")); }
  void order_current_stream() override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    throw_if_error(cuda_status(
        cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device_)).stream(), event_),
        "cudaStreamWaitEvent"));
  }
  double seconds() override { return 0.0; }
  bool ran() override {
    const cudaError_t state = cudaEventQuery(event_);
    if (state == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it
      return false;
    }
    throw_if_error(cuda_status(state, "cudaEventQuery"));
    return true;
  }

 private:
  cudaEvent_t event_;
  int device_;
};

class CudaQueue final : public DeviceQueue {
 public:
  explicit CudaQueue(at::Device device) : device_(device.has_index() ? device.index() : c10::cuda::current_device()) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    throw_if_error(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate"));
  }
  ~CudaQueue() override {
    cudaStreamSynchronize(stream_);  // nothing queued outlives the buffers the caller frees next
    cudaStreamDestroy(stream_);
  }
  CudaQueue(const CudaQueue&) = delete;
  CudaQueue& operator=(const CudaQueue&) = delete;

  void to_device(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, cudaMemcpyHostToDevice); }
  void to_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, cudaMemcpyDeviceToHost); }
  Status launch(const std::function<Status(void* stream)>& enqueue) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    return enqueue(stream_);
  }
  std::unique_ptr<QueueMark> mark() override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    cudaEvent_t event = nullptr;
    throw_if_error(cuda_status(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate"));
    auto mark = std::make_unique<CudaMark>(event, device_);
    throw_if_error(cuda_status(cudaEventRecord(event, stream_), "cudaEventRecord"));
    return mark;
  }

 private:
  void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    throw_if_error(cuda_status(cudaMemcpyAsync(dst, src, bytes, kind, stream_), "cudaMemcpyAsync (device queue)"));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
};

#endif  // TIERZERO_OFFLOAD_CUDA

}  // namespace

std::unique_ptr<DeviceQueue> DeviceQueue::create(at::Device device) {
#ifdef TIERZERO_OFFLOAD_CUDA
  if (device.is_cuda()) return std::make_unique<CudaQueue>(device);
#endif
  if (!device.is_cpu())
    throw Error(unsupported("a device queue on " + device.str() + ": this build has no CUDA; rebuild with CUDA"));
  return std::make_unique<HostQueue>();
}

}  // namespace tierzero::offload
