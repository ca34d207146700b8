#include "offload/torch/offload_torch.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <chrono>
#include <cstring>

#include "common/common.h"

#ifdef TIERZERO_OFFLOAD_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#endif

namespace tierzero::offload {
namespace {

// One copy of `bytes` from `src` to `dst`.
struct Span {
  void* dst;
  const void* src;
  size_t bytes;
};

// DeviceCopies' copies as lists of spans, queued by the device's copy().
class SpanCopies : public DeviceCopies {
 public:
  explicit SpanCopies(at::Device device) : device_(device) {}
  std::unique_ptr<CopyDone> to_host(void* dst, const at::Tensor& src) override {
    return copy({{dst, src.const_data_ptr(), src.nbytes()}}, /*h2d=*/false, {src});
  }
  std::unique_ptr<CopyDone> to_device(const at::Tensor& dst, const void* src) override {
    return copy({{dst.data_ptr(), src, dst.nbytes()}}, /*h2d=*/true, {dst});
  }
  DeviceUpload upload(const std::vector<const at::Tensor*>& src) override {
    DeviceUpload upload;  // new tensors, allocated in the current stream's order
    std::vector<Span> spans;
    for (const at::Tensor* host : src) {
      upload.tensors.push_back(at::empty_like(*host, host->options().device(device_).pinned_memory(false)));
      spans.push_back({upload.tensors.back().data_ptr(), host->const_data_ptr(), host->nbytes()});
    }
    upload.done = copy(spans, /*h2d=*/true, upload.tensors);
    return upload;
  }

 protected:
  // Queues `spans` (host to device when `h2d`, else back), whose device side is `device_memory`'s.
  virtual std::unique_ptr<CopyDone> copy(const std::vector<Span>& spans, bool h2d,
                                         const std::vector<at::Tensor>& device_memory) = 0;
  at::Device device_;
};

// A copy the host did (a CPU "device": when it was queued) or waits for (`fence`, when not null).
class HostDone final : public CopyDone {
 public:
  HostDone(std::shared_ptr<ReaderFence> fence, double seconds) : fence_(std::move(fence)), seconds_(seconds) {}
  void wait_host() override {
    if (fence_) fence_->wait_host();
  }
  void order_current_stream() override { wait_host(); }  // what follows is the host's
  double seconds() override { return seconds_; }

 private:
  std::shared_ptr<ReaderFence> fence_;
  double seconds_;
};

class HostGap final : public IdleGap {
 public:
  void end() override { end_ = std::chrono::steady_clock::now(); }
  double seconds() override { return std::chrono::duration<double>(end_ - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point end_ = start_;
};

class HostCopies final : public SpanCopies {
 public:
  explicit HostCopies(bool timing) : SpanCopies(at::kCPU), timing_(timing) {}
  void after_device_copies(const std::function<void()>& enqueue) override { enqueue(); }
  std::unique_ptr<IdleGap> open_idle_gap() override { return std::make_unique<HostGap>(); }

 private:
  std::unique_ptr<CopyDone> copy(const std::vector<Span>& spans, bool, const std::vector<at::Tensor>&) override {
    const auto start = std::chrono::steady_clock::now();
    for (const Span& span : spans) std::memcpy(span.dst, span.src, span.bytes);
    const double seconds =
        timing_ ? std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() : 0.0;
    return std::make_unique<HostDone>(nullptr, seconds);
  }
  bool timing_;
};

#ifdef TIERZERO_OFFLOAD_CUDA

class CudaDone final : public CopyDone {
 public:
  CudaDone(at::cuda::CUDAEvent done, std::unique_ptr<at::cuda::CUDAEvent> start)
      : done_(std::move(done)), start_(std::move(start)) {}
  void wait_host() override { done_.synchronize(); }
  void order_current_stream() override { done_.block(c10::cuda::getCurrentCUDAStream(done_.device_index())); }
  double seconds() override { return start_ ? start_->elapsed_time(done_) / 1e3 : 0.0; }

 private:
  at::cuda::CUDAEvent done_;
  std::unique_ptr<at::cuda::CUDAEvent> start_;
};

class CudaGap final : public IdleGap {
 public:
  explicit CudaGap(at::Device device) : device_(device) {
    start_.record(c10::cuda::getCurrentCUDAStream(device.index()));
  }
  void end() override { end_.record(c10::cuda::getCurrentCUDAStream(device_.index())); }
  double seconds() override {
    end_.synchronize();
    return start_.elapsed_time(end_) / 1e3;
  }

 private:
  at::Device device_;
  at::cuda::CUDAEvent start_{cudaEventDefault};
  at::cuda::CUDAEvent end_{cudaEventDefault};
};

class CudaCopies final : public SpanCopies {
 public:
  CudaCopies(at::Device device, bool timing)
      : SpanCopies(device),
        timing_(timing),
        d2h_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())),
        h2d_(c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}

  void after_device_copies(const std::function<void()>& enqueue) override {
    c10::cuda::CUDAStreamGuard guard(h2d_);
    enqueue();
  }
  std::unique_ptr<IdleGap> open_idle_gap() override {
    c10::cuda::CUDAGuard guard(device_);
    return std::make_unique<CudaGap>(device_);
  }

 private:
  // The device memory is not reused by LibTorch's allocator before the copy on `side` has run.
  std::unique_ptr<CopyDone> copy(const std::vector<Span>& spans, bool h2d,
                                 const std::vector<at::Tensor>& device_memory) override {
    const c10::cuda::CUDAStream& side = h2d ? h2d_ : d2h_;
    for (const at::Tensor& tensor : device_memory)
      c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), side);
    const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
    c10::cuda::CUDAGuard guard(device_);
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    ready.block(side);
    std::unique_ptr<at::cuda::CUDAEvent> start;
    if (timing_) {
      start = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
      start->record(side);
    }
    for (const Span& span : spans)
      throw_if_error(cuda_status(cudaMemcpyAsync(span.dst, span.src, span.bytes, kind, side.stream()),
                                 "cudaMemcpyAsync (offloaded step)"));
    at::cuda::CUDAEvent done(timing_ ? cudaEventDefault : cudaEventDisableTiming);
    done.record(side);
    return std::make_unique<CudaDone>(std::move(done), std::move(start));
  }

  bool timing_;
  c10::cuda::CUDAStream d2h_;
  c10::cuda::CUDAStream h2d_;
};

#endif  // TIERZERO_OFFLOAD_CUDA

}  // namespace

std::shared_ptr<CopyDone> host_done(std::shared_ptr<ReaderFence> fence) {
  return std::make_shared<HostDone>(std::move(fence), 0.0);
}

std::unique_ptr<DeviceCopies> DeviceCopies::create(at::Device device, bool timing) {
#ifdef TIERZERO_OFFLOAD_CUDA
  if (device.is_cuda()) return std::make_unique<CudaCopies>(device, timing);
#endif
  if (!device.is_cpu())
    throw Error(unsupported("offloaded step on " + device.str() + ": this build has no CUDA; rebuild with CUDA"));
  return std::make_unique<HostCopies>(timing);
}

at::Tensor inputs_to_device(const at::Tensor& host, at::Device device) {
  if (device.is_cpu()) return host;
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

Status limit_device_memory(at::Device device, uint64_t bytes) {
  if (bytes == 0 || device.is_cpu()) return {};
#ifdef TIERZERO_OFFLOAD_CUDA
  c10::cuda::CUDAGuard guard(device);
  const uint64_t total = device_memory_bytes(device);
  if (bytes > total)
    return out_of_space("tierzero.gpu_memory_limit " + format_bytes(bytes) + " (" + std::to_string(bytes) +
                        " bytes) exceeds the " + format_bytes(total) + " of " + device.str() +
                        "; lower tierzero.gpu_memory_limit or remove it");
  // Before a process's first CUDA tensor LibTorch's caching allocator is not set up yet, and the
  // fraction would be refused ("Allocator not initialized for device"): set it up first.
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  c10::cuda::CUDACachingAllocator::setMemoryFraction(static_cast<double>(bytes) / static_cast<double>(total),
                                                     device.index());
  return {};
#else
  return unsupported("tierzero.gpu_memory_limit on " + device.str() + ": this build has no CUDA");
#endif
}

uint64_t device_memory_bytes(at::Device device) {
  if (!device.is_cuda()) return 0;
#ifdef TIERZERO_OFFLOAD_CUDA
  size_t free = 0, total = 0;
  c10::cuda::CUDAGuard guard(device);
  throw_if_error(cuda_status(cudaMemGetInfo(&free, &total), "cudaMemGetInfo"));
  return total;
#else
  throw Error(unsupported("the memory of " + device.str() + ": this build has no CUDA"));
#endif
}

}  // namespace tierzero::offload
