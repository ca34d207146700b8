// measure_gpu_adam: the compact + 8-bit state in pinned host memory and on the device, stepped there
// by cpu_adam::step_on_gpu, with and without the copies each way.
#include "tools/bench_adam_gpu.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

namespace tierzero::tools {
namespace {

Status cuda_check(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return {};
  return internal_error(std::string("bench adam gpu: ") + what + ": " + cudaGetErrorName(error) + " (" +
                        cudaGetErrorString(error) + ")");
}

// One buffer of the state: its host data, bytes per element (per moment block for the scales), and
// whether the step writes it (the gradients only go up).
struct Part {
  const void* host;
  size_t unit;
  bool per_block;
  bool written;
  size_t offset = 0;  // in the pinned and the device allocation
  size_t bytes(size_t elements) const { return unit * (per_block ? cpu_adam::moment_block_count(elements) : elements); }
  size_t first_byte(size_t element) const { return unit * (per_block ? element / cpu_adam::kMomentBlock : element); }
};

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};

class GpuBench {
 public:
  GpuBench(const cpu_adam::AdamBuffers& host, const cpu_adam::AdamHyperParams& hp)
      : host_(host), hp_(hp), n_(host.params_16bit.count) {
    parts_ = {{host.params_16bit.data, 2, false, true},
              {host.master_residual.data(), 2, false, true},
              {host.exp_avg.data, 1, false, true},
              {host.exp_avg_sq.data, 1, false, true},
              {host.exp_avg_scales.data(), 4, true, true},
              {host.exp_avg_sq_scales.data(), 4, true, true},
              {host.grads.data, element_size(host.grads.type), false, false}};
    for (Part& p : parts_) {
      p.offset = total_;
      total_ += (p.bytes(n_) + 255) / 256 * 256;
    }
  }

  ~GpuBench() {
    for (cudaStream_t s : streams_) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  }
  GpuBench(const GpuBench&) = delete;
  GpuBench& operator=(const GpuBench&) = delete;

  Result<GpuAdamRates> run(int steps) {
    GpuAdamRates rates;
    TZ_RETURN_IF_ERROR(init(rates));
    TZ_ASSIGN_OR_RETURN(rates.exact, self_check());
    for (const Part& p : parts_) {
      const double per_param = static_cast<double>(p.bytes(n_)) / static_cast<double>(n_);
      rates.h2d_bytes_per_param += per_param;
      if (p.written) rates.d2h_bytes_per_param += per_param;
    }
    TZ_ASSIGN_OR_RETURN(const double kernel_seconds, timed(steps, false));
    TZ_ASSIGN_OR_RETURN(const double pcie_seconds, timed(steps, true));
    rates.kernel_gparams = static_cast<double>(n_) * steps / kernel_seconds / 1e9;
    rates.pcie_gparams = static_cast<double>(n_) * steps / pcie_seconds / 1e9;
    return rates;
  }

 private:
  Status init(GpuAdamRates& rates) {
    cudaDeviceProp prop{};
    TZ_RETURN_IF_ERROR(cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties"));
    rates.device = std::string(prop.name) + " (device 0)";
    void* pinned = nullptr;
    void* device = nullptr;
    TZ_RETURN_IF_ERROR(cuda_check(cudaMallocHost(&pinned, total_), "cudaMallocHost"));
    pinned_.reset(static_cast<std::byte*>(pinned));
    TZ_RETURN_IF_ERROR(cuda_check(cudaMalloc(&device, total_), "cudaMalloc"));
    device_.reset(static_cast<std::byte*>(device));
    for (const Part& p : parts_) std::memcpy(pinned_.get() + p.offset, p.host, p.bytes(n_));
    for (cudaStream_t& s : streams_) TZ_RETURN_IF_ERROR(cuda_check(cudaStreamCreate(&s), "cudaStreamCreate"));
    return {};
  }

  // The buffers of `count` elements whose parts (in parts_'s order) start at part_data[i].
  cpu_adam::AdamBuffers buffers_at(const std::vector<std::byte*>& part_data, size_t count) const {
    cpu_adam::AdamBuffers b{{},
                            {part_data[6], count, host_.grads.type},
                            {part_data[2], count, ElementType::kI8},
                            {part_data[3], count, ElementType::kU8},
                            {},
                            {part_data[0], count, ElementType::kBF16}};
    b.master_residual = {reinterpret_cast<int16_t*>(part_data[1]), count};
    b.exp_avg_scales = {reinterpret_cast<float*>(part_data[4]), cpu_adam::moment_block_count(count)};
    b.exp_avg_sq_scales = {reinterpret_cast<float*>(part_data[5]), cpu_adam::moment_block_count(count)};
    return b;
  }

  // The device buffers of elements [begin, begin + count) (begin on a block boundary).
  cpu_adam::AdamBuffers device_buffers(size_t begin, size_t count) const {
    std::vector<std::byte*> part_data;
    for (const Part& p : parts_) part_data.push_back(device_.get() + p.offset + p.first_byte(begin));
    return buffers_at(part_data, count);
  }

  // Copies elements [begin, begin + count) of every part (`written` ones only when `down`) up or down on `s`.
  Status copy(size_t begin, size_t count, bool down, cudaStream_t s) {
    for (const Part& p : parts_) {
      if (down && !p.written) continue;
      std::byte* host = pinned_.get() + p.offset + p.first_byte(begin);
      std::byte* dev = device_.get() + p.offset + p.first_byte(begin);
      const size_t bytes = p.bytes(begin + count) - p.first_byte(begin);
      TZ_RETURN_IF_ERROR(cuda_check(down ? cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s)
                                         : cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s),
                                    "cudaMemcpyAsync"));
    }
    return {};
  }

  // One GPU step of the whole state against step_portable (fused) on a prefix of it: every byte equal.
  Result<bool> self_check() {
    TZ_RETURN_IF_ERROR(copy(0, n_, false, streams_[0]));
    TZ_RETURN_IF_ERROR(cpu_adam::step_on_gpu(hp_, 1, 1.0f, device_buffers(0, n_), streams_[0]));
    TZ_RETURN_IF_ERROR(copy(0, n_, true, streams_[0]));
    TZ_RETURN_IF_ERROR(cuda_check(cudaStreamSynchronize(streams_[0]), "the self-check step"));
    const size_t prefix = std::min<size_t>(n_, size_t{1} << 20);
    std::vector<std::vector<std::byte>> copies;
    for (const Part& p : parts_) {
      const auto* src = static_cast<const std::byte*>(p.host);
      copies.emplace_back(src, src + p.bytes(prefix));
    }
    std::vector<std::byte*> part_data;
    for (std::vector<std::byte>& c : copies) part_data.push_back(c.data());
    TZ_RETURN_IF_ERROR(
        cpu_adam::step_portable(hp_, 1, 1.0f, buffers_at(part_data, prefix), cpu_adam::MulAddRounding::kFused));
    for (size_t i = 0; i < parts_.size(); ++i) {
      if (std::memcmp(copies[i].data(), pinned_.get() + parts_[i].offset, copies[i].size()) != 0) return false;
    }
    return true;
  }

  // Seconds for `steps` steps after one warm-up: the kernel on the resident state, or (`with_copies`)
  // chunks of 2^22 elements each uploaded, stepped and downloaded, alternating between two streams.
  Result<double> timed(int steps, bool with_copies) {
    constexpr size_t kChunk = size_t{1} << 22;
    std::chrono::steady_clock::time_point start;
    for (int s = 0; s <= steps; ++s) {
      if (s == 1) {
        TZ_RETURN_IF_ERROR(cuda_check(cudaDeviceSynchronize(), "a timed step"));
        start = std::chrono::steady_clock::now();
      }
      ++step_;
      if (!with_copies) {
        TZ_RETURN_IF_ERROR(cpu_adam::step_on_gpu(hp_, step_, 1.0f, device_buffers(0, n_), streams_[0]));
        continue;
      }
      for (size_t begin = 0, c = 0; begin < n_; begin += kChunk, ++c) {
        const size_t count = std::min(kChunk, n_ - begin);
        cudaStream_t stream = streams_[c % 2];
        TZ_RETURN_IF_ERROR(copy(begin, count, false, stream));
        TZ_RETURN_IF_ERROR(cpu_adam::step_on_gpu(hp_, step_, 1.0f, device_buffers(begin, count), stream));
        TZ_RETURN_IF_ERROR(copy(begin, count, true, stream));
      }
    }
    TZ_RETURN_IF_ERROR(cuda_check(cudaDeviceSynchronize(), "a timed step"));
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  const cpu_adam::AdamBuffers& host_;
  const cpu_adam::AdamHyperParams hp_;
  const size_t n_;
  std::vector<Part> parts_;
  size_t total_ = 0;
  std::unique_ptr<std::byte, CudaFreeHost> pinned_;
  std::unique_ptr<std::byte, CudaFree> device_;
  cudaStream_t streams_[2] = {nullptr, nullptr};
  int64_t step_ = 1;
};

}  // namespace

Result<GpuAdamRates> measure_gpu_adam(const cpu_adam::AdamBuffers& host, const cpu_adam::AdamHyperParams& hp,
                                      int steps) {
  if (cpu_adam::cuda_device_count() == 0) return unsupported("no CUDA device");
  if (host.master_residual.empty() || host.exp_avg.type != ElementType::kI8) {
    return invalid_argument("the GPU step takes --master compact --moments int8");
  }
  GpuBench bench(host, hp);
  return bench.run(steps);
}

}  // namespace tierzero::tools
