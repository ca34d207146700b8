// DeviceCopies and their DeviceQueues (offload_torch.h): CUDA streams and events, or on a CPU
// "device" memcpy, at once or on a queue's thread.
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "offload/torch/offload_torch.h"

#include "common/common.h"

#ifdef TIERZERO_OFFLOAD_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
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
  at::Device device() const override { return device_; }
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

// A CPU "device"'s queue: a thread of its own runs the work in the order queued, as a stream would
// (so the host's code overlaps it as it overlaps a GPU's). The first error stops the work after it and
// is thrown by every wait from then on.
class HostWork {
 public:
  HostWork() : thread_([this] { run(); }) {}
  ~HostWork() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();  // after the work queued: nothing outlives the buffers the caller frees next
  }
  HostWork(const HostWork&) = delete;
  HostWork& operator=(const HostWork&) = delete;

  void queue(std::function<Status()> work) {
    {
      std::lock_guard lock(mutex_);
      work_.push_back(std::move(work));
      ++queued_;
    }
    changed_.notify_all();
  }
  uint64_t queued() {
    std::lock_guard lock(mutex_);
    return queued_;
  }
  bool ran(uint64_t count) {
    std::lock_guard lock(mutex_);
    throw_if_error(error_);
    return done_ >= count;
  }
  void wait(uint64_t count) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return done_ >= count || !error_.ok(); });
    throw_if_error(error_);
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || !work_.empty(); });
      if (work_.empty()) return;  // stopping, everything done
      std::function<Status()> work = std::move(work_.front());
      work_.pop_front();
      lock.unlock();
      Status status = error_.ok() ? work() : Status();
      lock.lock();
      if (error_.ok() && !status.ok()) error_ = std::move(status);
      ++done_;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<Status()>> work_;
  uint64_t queued_ = 0;
  uint64_t done_ = 0;
  Status error_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is built
};

class HostMark final : public QueueMark {
 public:
  HostMark(std::shared_ptr<HostWork> work, uint64_t count) : work_(std::move(work)), count_(count) {}
  void wait_host() override { work_->wait(count_); }
  void order_current_stream() override { wait_host(); }  // what follows is the host's
  double seconds() override { return 0.0; }
  bool ran() override { return work_->ran(count_); }

 private:
  std::shared_ptr<HostWork> work_;
  uint64_t count_;  // the work queued before the mark
};

class HostQueue final : public DeviceQueue {
 public:
  void to_device(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void to_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  Status launch(const std::function<Status(void* stream)>& enqueue) override {
    work_->queue([enqueue] { return enqueue(nullptr); });
    return Status();
  }
  std::unique_ptr<QueueMark> mark() override { return std::make_unique<HostMark>(work_, work_->queued()); }

 private:
  void copy(void* dst, const void* src, size_t bytes) {
    work_->queue([=] {
      std::memcpy(dst, src, bytes);
      return Status();
    });
  }
  std::shared_ptr<HostWork> work_ = std::make_shared<HostWork>();
};

class HostCopies final : public SpanCopies {
 public:
  explicit HostCopies(bool timing) : SpanCopies(at::kCPU), timing_(timing) {}
  void after_device_copies(const std::function<void()>& enqueue) override { enqueue(); }
  std::unique_ptr<IdleGap> open_idle_gap() override { return std::make_unique<HostGap>(); }
  std::unique_ptr<DeviceQueue> queue() override { return std::make_unique<HostQueue>(); }

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

// Queues `spans` (host to device when `h2d`, else back) on `stream`, its device current.
void copy_spans(const std::vector<Span>& spans, bool h2d, cudaStream_t stream) {
  const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  for (const Span& span : spans)
    throw_if_error(cuda_status(cudaMemcpyAsync(span.dst, span.src, span.bytes, kind, stream), "cudaMemcpyAsync"));
}

// What is queued on a stream so far: a side stream's copies (timed from `start` when not null) or a
// queue's work.
class CudaDone final : public QueueMark {
 public:
  CudaDone(const c10::cuda::CUDAStream& stream, std::unique_ptr<at::cuda::CUDAEvent> start)
      : done_(start ? cudaEventDefault : cudaEventDisableTiming), start_(std::move(start)) {
    done_.record(stream);
  }
  void wait_host() override {
    throw_if_error(cuda_status(cudaEventSynchronize(done_.event()), "cudaEventSynchronize"));
  }
  void order_current_stream() override { done_.block(c10::cuda::getCurrentCUDAStream(done_.device_index())); }
  double seconds() override { return start_ ? start_->elapsed_time(done_) / 1e3 : 0.0; }
  bool ran() override {
    const cudaError_t state = cudaEventQuery(done_.event());
    if (state == cudaErrorNotReady) {
      cudaGetLastError();  // not an error: clear it
      return false;
    }
    throw_if_error(cuda_status(state, "cudaEventQuery"));
    return true;
  }

 private:
  at::cuda::CUDAEvent done_;
  std::unique_ptr<at::cuda::CUDAEvent> start_;
};

class CudaQueue final : public DeviceQueue {
 public:
  explicit CudaQueue(at::DeviceIndex device) : stream_(create_stream(device)) {}
  ~CudaQueue() override {
    cudaStreamSynchronize(stream_.stream());  // nothing queued outlives the buffers the caller frees next
    cudaStreamDestroy(stream_.stream());
  }
  CudaQueue(const CudaQueue&) = delete;
  CudaQueue& operator=(const CudaQueue&) = delete;

  void to_device(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, /*h2d=*/true); }
  void to_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes, /*h2d=*/false); }
  Status launch(const std::function<Status(void* stream)>& enqueue) override {
    c10::cuda::CUDAGuard guard(stream_.device_index());
    return enqueue(stream_.stream());
  }
  std::unique_ptr<QueueMark> mark() override { return std::make_unique<CudaDone>(stream_, nullptr); }

 private:
  static c10::cuda::CUDAStream create_stream(at::DeviceIndex device) {
    c10::cuda::CUDAGuard guard(device);
    cudaStream_t stream = nullptr;
    throw_if_error(cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
    return c10::cuda::getStreamFromExternal(stream, device);
  }
  void copy(void* dst, const void* src, size_t bytes, bool h2d) {
    c10::cuda::CUDAGuard guard(stream_.device_index());
    copy_spans({{dst, src, bytes}}, h2d, stream_.stream());
  }

  c10::cuda::CUDAStream stream_;
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
  std::unique_ptr<DeviceQueue> queue() override {
    return std::make_unique<CudaQueue>(device_.has_index() ? device_.index() : c10::cuda::current_device());
  }

 private:
  // The device memory is not reused by LibTorch's allocator before the copy on `side` has run.
  std::unique_ptr<CopyDone> copy(const std::vector<Span>& spans, bool h2d,
                                 const std::vector<at::Tensor>& device_memory) override {
    const c10::cuda::CUDAStream& side = h2d ? h2d_ : d2h_;
    for (const at::Tensor& tensor : device_memory)
      c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), side);
    c10::cuda::CUDAGuard guard(device_);
    at::cuda::CUDAEvent ready;
    ready.record(c10::cuda::getCurrentCUDAStream(device_.index()));
    ready.block(side);
    std::unique_ptr<at::cuda::CUDAEvent> start;
    if (timing_) {
      start = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
      start->record(side);
    }
    copy_spans(spans, h2d, side.stream());
    return std::make_unique<CudaDone>(side, std::move(start));
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
  if (std::getenv("PYTORCH_CUDA_ALLOC_CONF") == nullptr && std::getenv("PYTORCH_ALLOC_CONF") == nullptr)
    c10::CachingAllocator::setAllocatorSettings("expandable_segments:True");
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
