// Times host <-> GPU copies two ways in the same process: tierzero's path (DeviceMemory lanes
// and events; pageable memory staged through pinned buffers) and plain cudaMemcpy, chunk by chunk.
#include <cuda_runtime.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/common.h"
#include "offload/internal/device_memory.h"

namespace tierzero::offload {
namespace {

constexpr uint64_t kStagingDepth = 3;

Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return {};
  return internal_error(std::string(what) + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

void fill_pattern(std::byte* p, uint64_t bytes, uint64_t seed) {
  for (uint64_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = (i / 8) * 0x9E3779B97F4A7C15ull ^ seed;
    std::memcpy(p + i, &v, 8);
  }
}

class CudaCopyProbe final : public CopyProbe {
 public:
  CudaCopyProbe(uint64_t bytes, int device) : bytes_(bytes), device_id_(device) {}
  ~CudaCopyProbe() override {
    cudaSetDevice(device_id_);
    for (void* p : {dev_in_, dev_out_}) cudaFree(p);
    for (std::byte* p : {pinned_src_, pinned_dst_}) cudaFreeHost(p);
    for (std::byte* p : staging_) device_->free_pinned(p, 0);
    for (cudaStream_t s : baseline_streams_) cudaStreamDestroy(s);
  }

  Status init() {
    TZ_ASSIGN_OR_RETURN(device_, make_cuda_device_memory(device_id_));
    TZ_RETURN_IF_ERROR(check(cudaSetDevice(device_id_), "cudaSetDevice"));
    TZ_RETURN_IF_ERROR(check(cudaMalloc(&dev_in_, bytes_), "cudaMalloc"));
    TZ_RETURN_IF_ERROR(check(cudaMalloc(&dev_out_, bytes_), "cudaMalloc"));
    TZ_RETURN_IF_ERROR(check(cudaHostAlloc(&pinned_src_, bytes_, cudaHostAllocPortable), "cudaHostAlloc"));
    TZ_RETURN_IF_ERROR(check(cudaHostAlloc(&pinned_dst_, bytes_, cudaHostAllocPortable), "cudaHostAlloc"));
    pageable_src_ = std::make_unique<std::byte[]>(bytes_);
    pageable_dst_ = std::make_unique<std::byte[]>(bytes_);
    fill_pattern(pinned_src_, bytes_, 0x5eed);
    std::memcpy(pageable_src_.get(), pinned_src_, bytes_);
    std::memset(pageable_dst_.get(), 0, bytes_);
    TZ_RETURN_IF_ERROR(check(cudaMemcpy(dev_out_, pinned_src_, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy"));
    for (cudaStream_t& s : baseline_streams_) {
      TZ_RETURN_IF_ERROR(check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"));
    }
    return {};
  }

  std::string device_description() const override { return device_->description(); }

  Result<CopyMeasurement> measure(CopyDirection direction, HostMemoryKind host, CopyMethod method, uint64_t chunk_bytes,
                                  int repeats) override {
    if (chunk_bytes == 0 || repeats < 1) return invalid_argument("chunk_bytes and repeats must be positive");
    TZ_RETURN_IF_ERROR(ensure_staging(chunk_bytes));
    TZ_RETURN_IF_ERROR(pass(direction, host, method, chunk_bytes));  // warm-up
    TZ_RETURN_IF_ERROR(clear_destinations(direction, host));
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) TZ_RETURN_IF_ERROR(pass(direction, host, method, chunk_bytes));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    CopyMeasurement m;
    m.bytes = bytes_ * repeats * (direction == CopyDirection::kDuplex ? 2 : 1);
    m.seconds = seconds;
    TZ_ASSIGN_OR_RETURN(m.verified, verify(direction, host));
    return m;
  }

 private:
  std::byte* host_src(HostMemoryKind host) {
    return host == HostMemoryKind::kPinned ? pinned_src_ : pageable_src_.get();
  }
  std::byte* host_dst(HostMemoryKind host) {
    return host == HostMemoryKind::kPinned ? pinned_dst_ : pageable_dst_.get();
  }

  Status ensure_staging(uint64_t chunk) {
    if (staging_chunk_ >= chunk) return {};
    for (std::byte* p : staging_) device_->free_pinned(p, 0);
    staging_.clear();
    for (uint64_t i = 0; i < 2 * kStagingDepth; ++i) {
      TZ_ASSIGN_OR_RETURN(void* p, device_->allocate_pinned(chunk, false));
      staging_.push_back(static_cast<std::byte*>(p));
    }
    staging_chunk_ = chunk;
    return {};
  }

  Status clear_destinations(CopyDirection direction, HostMemoryKind host) {
    cudaSetDevice(device_id_);
    if (direction != CopyDirection::kD2H) TZ_RETURN_IF_ERROR(check(cudaMemset(dev_in_, 0, bytes_), "cudaMemset"));
    if (direction != CopyDirection::kH2D) std::memset(host_dst(host), 0, bytes_);
    return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize (outside the timed region)");
  }

  Result<bool> verify(CopyDirection direction, HostMemoryKind host) {
    cudaSetDevice(device_id_);
    bool ok = true;
    if (direction != CopyDirection::kD2H) {
      auto back = std::make_unique<std::byte[]>(bytes_);
      TZ_RETURN_IF_ERROR(check(cudaMemcpy(back.get(), dev_in_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy"));
      ok = ok && std::memcmp(back.get(), pinned_src_, bytes_) == 0;
    }
    if (direction != CopyDirection::kH2D) ok = ok && std::memcmp(host_dst(host), pinned_src_, bytes_) == 0;
    return ok;
  }

  Status pass(CopyDirection direction, HostMemoryKind host, CopyMethod method, uint64_t chunk) {
    if (direction != CopyDirection::kDuplex)
      return one_way(direction == CopyDirection::kH2D ? Lane::kH2D : Lane::kD2H, host, method, chunk, 0);
    Status h2d, d2h;
    std::thread other([&] { d2h = one_way(Lane::kD2H, host, method, chunk, kStagingDepth); });
    h2d = one_way(Lane::kH2D, host, method, chunk, 0);
    other.join();
    return h2d.ok() ? d2h : h2d;
  }

  // One direction over the whole buffer. `staging_base` picks this direction's staging buffers.
  Status one_way(Lane lane, HostMemoryKind host, CopyMethod method, uint64_t chunk, uint64_t staging_base) {
    cudaSetDevice(device_id_);
    const bool h2d = lane == Lane::kH2D;
    std::byte* host_buf = h2d ? host_src(host) : host_dst(host);
    auto* dev = static_cast<std::byte*>(h2d ? dev_in_ : dev_out_);
    if (method == CopyMethod::kCudaMemcpy) {
      cudaStream_t stream = baseline_streams_[h2d ? 0 : 1];
      const cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      for (uint64_t off = 0; off < bytes_; off += chunk) {
        const uint64_t n = std::min(chunk, bytes_ - off);
        void* dst = h2d ? static_cast<void*>(dev + off) : host_buf + off;
        const void* src = h2d ? static_cast<const void*>(host_buf + off) : dev + off;
        TZ_RETURN_IF_ERROR(check(cudaMemcpyAsync(dst, src, n, kind, stream), "cudaMemcpyAsync"));
        TZ_RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"));
      }
      return {};
    }
    if (host == HostMemoryKind::kPinned) {
      for (uint64_t off = 0; off < bytes_; off += chunk) {
        const uint64_t n = std::min(chunk, bytes_ - off);
        TZ_RETURN_IF_ERROR(h2d ? device_->copy_async(lane, dev + off, host_buf + off, n)
                               : device_->copy_async(lane, host_buf + off, dev + off, n));
      }
      TZ_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> done, device_->create_event());
      TZ_RETURN_IF_ERROR(done->record(lane));
      return done->wait();
    }
    return staged(lane, host_buf, dev, chunk, staging_base);
  }

  // Pageable memory through pinned staging buffers: the CPU copies chunk k while the DMA engine
  // moves chunk k-1.
  Status staged(Lane lane, std::byte* host_buf, std::byte* dev, uint64_t chunk, uint64_t staging_base) {
    std::unique_ptr<DeviceEvent> events[kStagingDepth];
    for (auto& e : events) {
      TZ_ASSIGN_OR_RETURN(e, device_->create_event());
    }
    const uint64_t chunks = (bytes_ + chunk - 1) / chunk;
    if (lane == Lane::kH2D) {
      for (uint64_t k = 0; k < chunks; ++k) {
        const uint64_t slot = k % kStagingDepth, off = k * chunk, n = std::min(chunk, bytes_ - off);
        TZ_RETURN_IF_ERROR(events[slot]->wait());
        std::memcpy(staging_[staging_base + slot], host_buf + off, n);
        TZ_RETURN_IF_ERROR(device_->copy_async(lane, dev + off, staging_[staging_base + slot], n));
        TZ_RETURN_IF_ERROR(events[slot]->record(lane));
      }
      for (auto& e : events) TZ_RETURN_IF_ERROR(e->wait());
      return {};
    }
    for (uint64_t k = 0; k < chunks + kStagingDepth - 1; ++k) {
      if (k < chunks) {
        const uint64_t slot = k % kStagingDepth, off = k * chunk, n = std::min(chunk, bytes_ - off);
        TZ_RETURN_IF_ERROR(device_->copy_async(lane, staging_[staging_base + slot], dev + off, n));
        TZ_RETURN_IF_ERROR(events[slot]->record(lane));
      }
      if (k + 1 >= kStagingDepth) {
        const uint64_t done = k + 1 - kStagingDepth;
        const uint64_t slot = done % kStagingDepth, off = done * chunk, n = std::min(chunk, bytes_ - off);
        TZ_RETURN_IF_ERROR(events[slot]->wait());
        std::memcpy(host_buf + off, staging_[staging_base + slot], n);
      }
    }
    return {};
  }

  uint64_t bytes_;
  int device_id_;
  std::unique_ptr<DeviceMemory> device_;
  void* dev_in_ = nullptr;   // H2D destination
  void* dev_out_ = nullptr;  // D2H source, holds the pattern
  std::byte* pinned_src_ = nullptr;
  std::byte* pinned_dst_ = nullptr;
  std::unique_ptr<std::byte[]> pageable_src_;
  std::unique_ptr<std::byte[]> pageable_dst_;
  std::vector<std::byte*> staging_;
  uint64_t staging_chunk_ = 0;
  cudaStream_t baseline_streams_[2] = {nullptr, nullptr};
};

}  // namespace

Result<std::unique_ptr<CopyProbe>> make_cuda_copy_probe(uint64_t bytes, int cuda_device) {
  auto probe = std::make_unique<CudaCopyProbe>(bytes, cuda_device);
  TZ_RETURN_IF_ERROR(probe->init());
  return std::unique_ptr<CopyProbe>(std::move(probe));
}

}  // namespace tierzero::offload
