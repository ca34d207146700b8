// Device queues (offload_torch.h): a CUDA stream of the queue's own, or, on a CPU "device", a thread
// of its own.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "offload/torch/offload_torch.h"

#ifdef TIERZERO_OFFLOAD_CUDA
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace tierzero::offload {
namespace {

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

  // Queues `work`; returns how many items are queued in all, counting it.
  uint64_t queue(std::function<Status()> work) {
    uint64_t queued = 0;
    {
      std::lock_guard lock(mutex_);
      work_.push_back(std::move(work));
      queued = ++queued_;
    }
    changed_.notify_all();
    return queued;
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
