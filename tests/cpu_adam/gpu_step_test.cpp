// step_on_gpu (the CUDA kernels) against step_portable with fused multiply-adds, byte for byte, over
// the inputs of portable_step_test.cpp (8-bit, bf16 and fp32 moments); where the CPU's SIMD target fuses, also against
// CpuAdam::step. Skips without a CUDA device (and in builds without CUDA).
#include <cstring>
#include <string>
#include <vector>

#include "cpu_adam/adam.h"
#include "tests/cpu_adam/compact_cases.h"
#include "tests/support/status_matchers.h"

#ifdef TIERZERO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tierzero::cpu_adam {
namespace {

using cases::CompactCase;
using cases::CompactValues;

TEST(PortableStepGpu, RefusesOtherLayoutsBeforeAnyLaunch) {
  CompactValues state = cases::compact_cases().front().initial;
  reference::TypedBuffer grads(ElementType::kF32, state.size());
  AdamBuffers b = state.buffers(grads.const_view());
  std::vector<float> master(state.size());
  b.params = master;
  b.params_16bit = {};
  b.master_residual = {};
  EXPECT_ERROR(step_on_gpu(AdamHyperParams{}, 1, 1.0f, b, nullptr), ErrorCode::kInvalidArgument, "compact master");
}

#ifdef TIERZERO_HAVE_CUDA
// A device copy of a host vector, freed at scope end.
template <class T>
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<T>& host) : size_(host.size()) {
    EXPECT_EQ(cudaMalloc(&data_, bytes() + 1), cudaSuccess);
    upload(host);
  }
  ~DeviceVector() { cudaFree(data_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  T* data() { return data_; }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download(std::vector<T>& host) const {
    EXPECT_EQ(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  }

 private:
  size_t bytes() const { return size_ * sizeof(T); }
  T* data_ = nullptr;
  size_t size_;
};

// Every step of `c` on the GPU and with step_portable(kFused) (and CpuAdam::step when `with_simd`);
// returns the first difference after any step, "" when all bytes agree.
std::string first_gpu_difference(const CompactCase& c, bool with_simd) {
  const size_t n = c.initial.size();
  CompactValues gpu = c.initial, portable = c.initial, simd = c.initial;
  DeviceVector<uint16_t> hi(gpu.hi);
  DeviceVector<int16_t> residual(gpu.residual);
  DeviceVector<uint8_t> m(gpu.m), v(gpu.v);
  DeviceVector<float> m_scales(gpu.m_scales), v_scales(gpu.v_scales);
  DeviceVector<uint8_t> grads(std::vector<uint8_t>(c.steps.front().grads.bytes().size()));
  const CpuAdam adam({.threads = 2, .tile_elements = kMomentBlock});
  const bool eight = gpu.moments == ElementType::kI8;
  for (const cases::CompactStep& s : c.steps) {
    grads.upload(s.grads.bytes());
    AdamBuffers device{{},
                       ConstElements{grads.data(), n, s.grads.type()},
                       Elements{m.data(), n, gpu.moments},
                       Elements{v.data(), n, eight ? ElementType::kU8 : gpu.moments},
                       {},
                       Elements{hi.data(), n, ElementType::kBF16}};
    device.master_residual = std::span<int16_t>(residual.data(), n);
    if (eight) {
      device.exp_avg_scales = std::span<float>(m_scales.data(), gpu.m_scales.size());
      device.exp_avg_sq_scales = std::span<float>(v_scales.data(), gpu.v_scales.size());
    }
    EXPECT_OK(step_on_gpu(s.hp, s.number, s.grad_multiplier, device, nullptr));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    hi.download(gpu.hi), residual.download(gpu.residual), m.download(gpu.m), v.download(gpu.v);
    m_scales.download(gpu.m_scales), v_scales.download(gpu.v_scales);
    EXPECT_OK(step_portable(s.hp, s.number, s.grad_multiplier, portable.buffers(s.grads.const_view()),
                            MulAddRounding::kFused));
    std::string difference = cases::first_difference(gpu, portable);
    if (difference.empty() && with_simd) {
      EXPECT_OK(adam.step(s.hp, s.number, s.grad_multiplier, simd.buffers(s.grads.const_view())));
      difference = cases::first_difference(gpu, simd);
      if (!difference.empty()) difference = "against CpuAdam::step: " + difference;
    }
    if (!difference.empty()) return "step " + std::to_string(s.number) + ": " + difference;
  }
  return "";
}
#endif

TEST(PortableStepGpu, EqualsPortableFusedAndCpuAdamOnFmaTargetsByteForByte) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (or a build without CUDA)";
#ifdef TIERZERO_HAVE_CUDA
  const bool with_simd = simd_target_mul_add() == MulAddRounding::kFused;
  SCOPED_TRACE("CPU target " + simd_target_name() + (with_simd ? " (fused: compared too)" : " (not fused)"));
  for (const CompactCase& c : cases::compact_cases()) EXPECT_EQ(first_gpu_difference(c, with_simd), "") << c.name;
#endif
}

}  // namespace
}  // namespace tierzero::cpu_adam
