// CopyProbe (offload_torch.h): host <-> GPU copies timed two ways in one process, training's path
// (DeviceCopies) and plain cudaMemcpy, chunk by chunk.
#include "offload/torch/offload_torch.h"

#ifdef TIERZERO_OFFLOAD_CUDA
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <future>

#endif

namespace tierzero::offload {

#ifdef TIERZERO_OFFLOAD_CUDA
namespace {

void fill_pattern(std::byte* p, uint64_t bytes, uint64_t seed) {
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = (i / 8) * 0x9E3779B97F4A7C15ull ^ seed;
    std::memcpy(p + i, &v, 8);
  }
}

class CudaCopyProbe final : public CopyProbe {
 public:
  CudaCopyProbe(uint64_t bytes, at::Device device, std::string description)
      : bytes_(bytes), device_(device), description_(std::move(description)) {}

  void init() {
    c10::cuda::CUDAGuard guard(device_);
    copies_ = DeviceCopies::create(device_, /*timing=*/false);
    const at::TensorOptions options = at::TensorOptions().dtype(at::kByte);
    const auto n = static_cast<int64_t>(bytes_);
    dev_in_ = at::zeros({n}, options.device(device_));
    dev_out_ = at::empty({n}, options.device(device_));
    for (int k = 0; k < 2; ++k) {  // HostMemoryKind: pinned, pageable
      src_[k] = at::empty({n}, options.pinned_memory(k == 0));
      dst_[k] = at::zeros({n}, options.pinned_memory(k == 0));
    }
    fill_pattern(bytes_of(src_[0]).data(), bytes_, 0x5eed);
    src_[1].copy_(src_[0]);
    dev_out_.copy_(src_[0]);
  }

  std::string device_description() const override { return description_; }

  Result<CopyMeasurement> measure(CopyDirection direction, HostMemoryKind host, CopyMethod method, uint64_t chunk_bytes,
                                  int repeats) override {
    if (chunk_bytes == 0 || repeats < 1) return invalid_argument("chunk_bytes and repeats must be positive");
    try {
      c10::cuda::CUDAGuard guard(device_);
      pass(direction, host, method, chunk_bytes);  // warm-up
      clear_destinations(direction, host);
      const auto start = std::chrono::steady_clock::now();
      for (int r = 0; r < repeats; ++r) pass(direction, host, method, chunk_bytes);
      CopyMeasurement m;
      m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      m.bytes = bytes_ * repeats * (direction == CopyDirection::kDuplex ? 2 : 1);
      m.verified = verified(direction, host);
      return m;
    } catch (const Error& e) {
      return e.status();
    } catch (const std::exception& e) {  // LibTorch's errors (c10::Error)
      return internal_error(std::string("bench pcie: ") + e.what());
    }
  }

 private:
  void clear_destinations(CopyDirection direction, HostMemoryKind host) {
    if (direction != CopyDirection::kD2H) dev_in_.zero_();
    if (direction != CopyDirection::kH2D) dst_[static_cast<int>(host)].zero_();
    throw_if_error(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize (outside the timed region)"));
  }

  bool verified(CopyDirection direction, HostMemoryKind host) const {
    bool ok = true;
    if (direction != CopyDirection::kD2H) ok = ok && at::equal(dev_in_.cpu(), src_[0]);
    if (direction != CopyDirection::kH2D) ok = ok && at::equal(dst_[static_cast<int>(host)], src_[0]);
    return ok;
  }

  void pass(CopyDirection direction, HostMemoryKind host, CopyMethod method, uint64_t chunk) {
    if (direction != CopyDirection::kDuplex) return one_way(direction == CopyDirection::kH2D, host, method, chunk);
    // Device to host on a second thread, whose future rethrows its error (and waits should h2d throw).
    std::future<void> d2h = std::async(std::launch::async, [&] {
      c10::cuda::CUDAGuard guard(device_);
      one_way(false, host, method, chunk);
    });
    one_way(true, host, method, chunk);
    d2h.get();
  }

  // One direction over the whole buffer, `chunk` bytes a copy.
  void one_way(bool h2d, HostMemoryKind host, CopyMethod method, uint64_t chunk) {
    std::byte* host_buf = bytes_of((h2d ? src_ : dst_)[static_cast<int>(host)]).data();
    const at::Tensor& dev = h2d ? dev_in_ : dev_out_;
    std::unique_ptr<CopyDone> last;
    for (uint64_t off = 0; off < bytes_; off += chunk) {
      const uint64_t n = std::min(chunk, bytes_ - off);
      if (method == CopyMethod::kTierzero) {
        const at::Tensor piece = dev.narrow(0, static_cast<int64_t>(off), static_cast<int64_t>(n));
        last = h2d ? copies_->to_device(piece, host_buf + off) : copies_->to_host(host_buf + off, piece);
        continue;
      }
      cudaStream_t stream = baseline_streams_[h2d ? 0 : 1].stream();
      std::byte* dev_at = bytes_of(dev).data() + off;
      throw_if_error(cuda_status(h2d ? cudaMemcpyAsync(dev_at, host_buf + off, n, cudaMemcpyHostToDevice, stream)
                                     : cudaMemcpyAsync(host_buf + off, dev_at, n, cudaMemcpyDeviceToHost, stream),
                                 "cudaMemcpyAsync"));
      throw_if_error(cuda_status(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
    }
    if (last) last->wait_host();  // the side stream runs its copies in order
  }

  uint64_t bytes_;
  at::Device device_;
  std::string description_;
  std::unique_ptr<DeviceCopies> copies_;
  at::Tensor dev_in_;           // H2D destination
  at::Tensor dev_out_;          // D2H source, holds the pattern
  at::Tensor src_[2], dst_[2];  // by HostMemoryKind: the pattern, and where it is copied back to
  c10::cuda::CUDAStream baseline_streams_[2] = {c10::cuda::getStreamFromPool(false, device_.index()),
                                                c10::cuda::getStreamFromPool(false, device_.index())};
};

}  // namespace
#endif  // TIERZERO_OFFLOAD_CUDA

Result<std::unique_ptr<CopyProbe>> CopyProbe::create(uint64_t bytes, int cuda_device) {
#ifdef TIERZERO_OFFLOAD_CUDA
  TZ_ASSIGN_OR_RETURN(std::string description, describe_gpu(cuda_device));
  try {
    auto probe = std::make_unique<CudaCopyProbe>(
        bytes, at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(cuda_device)), std::move(description));
    probe->init();
    return std::unique_ptr<CopyProbe>(std::move(probe));
  } catch (const Error& e) {
    return e.status();
  } catch (const std::exception& e) {  // LibTorch's errors (c10::Error: out of memory)
    return resource_exhausted("bench pcie: cannot allocate its " + format_bytes(bytes) + " buffers: " + e.what() +
                              "; lower --size");
  }
#else
  (void)bytes;
  (void)cuda_device;
  return unsupported("this tierzero was built without CUDA (no nvcc at configure time)");
#endif
}

}  // namespace tierzero::offload
