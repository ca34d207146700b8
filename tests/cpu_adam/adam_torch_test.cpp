// CpuAdam against PyTorch's own fused CPU optimizer (at::_fused_adam_ / at::_fused_adamw_, what
// torch.optim.Adam/AdamW(fused=True) call): the same sequence of steps, with lr and betas changing,
// gives the same params, moments and 16-bit copies, on every compiled Highway target; so do bf16
// params with bf16 moments against torch on bf16 tensors.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cpu_adam/adam.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

constexpr int kSteps = 30;
constexpr int64_t kCount = 10007;     // no multiple of any vector width: torch's scalar tail runs too
constexpr double kLossScale = 256.0;  // a power of two: g * (1/scale) == g / scale exactly

AdamHyperParams schedule(AdamMode mode, int k) {
  AdamHyperParams hp;
  hp.mode = mode;
  hp.lr = 1e-3 * std::min(1.0, k / 10.0) * std::pow(0.98, k);
  hp.beta1 = k <= 15 ? 0.9 : 0.85;
  hp.beta2 = k <= 15 ? 0.999 : 0.98;
  hp.eps = 1e-8;
  hp.weight_decay = 0.1;
  return hp;
}

// The gradients of step k as torch produced them in `dtype` (float, bfloat16 or half), loss-scaled.
at::Tensor grads_of_step(int k, at::ScalarType dtype) {
  at::manual_seed(1000 + k);
  return (at::randn({kCount}) * kLossScale).to(dtype);
}

ElementType element_type_of(at::ScalarType dtype) {
  if (dtype == at::kBFloat16) return ElementType::kBF16;
  if (dtype == at::kHalf) return ElementType::kF16;
  return ElementType::kF32;
}

// One torch.optim step through PyTorch's fused CPU kernel (Adam or AdamW) with grad_scale
// kLossScale: `step` is incremented first, as torch.optim does; `grads` (a copy the caller hands
// over) is unscaled in place by torch.
void torch_fused_step(AdamMode mode, const AdamHyperParams& hp, at::Tensor& params, at::Tensor grads, at::Tensor& m,
                      at::Tensor& v, at::Tensor& step) {
  step.add_(1);
  const at::Tensor scale = at::full({1}, kLossScale);
  if (mode == AdamMode::kAdam) {
    at::_fused_adam_({params}, {grads}, {m}, {v}, {}, {step}, hp.lr, hp.beta1, hp.beta2, hp.weight_decay, hp.eps, false,
                     false, scale, std::nullopt);
  } else {
    at::_fused_adamw_({params}, {grads}, {m}, {v}, {}, {step}, hp.lr, hp.beta1, hp.beta2, hp.weight_decay, hp.eps,
                      false, false, scale, std::nullopt);
  }
}

ConstElements const_view(const at::Tensor& t) {
  return {t.data_ptr(), static_cast<size_t>(t.numel()), element_type_of(t.scalar_type())};
}

Elements view(at::Tensor& t) {
  return {t.data_ptr(), static_cast<size_t>(t.numel()), element_type_of(t.scalar_type())};
}

class TorchAdamTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(TorchAdamTest);

// Tolerances: on targets with FMA (AVX2, AVX-512) params, m and v are bit-identical to torch's
// vectorised loop, which does the same float operations in the same order with the same fused
// multiply-adds (torch's scalar tail, the last kCount % 16 elements, rounds v differently).
// Targets without FMA (SSE4, SSSE3, scalar) round those three multiply-adds twice, so over the run
// |dp| <= 1e-6 * |p| + 1e-7, |dm| <= 1e-6 * |m| + 1e-7 and |dv| <= 1e-6 * v + 1e-12 (measured: 2 ulp).
TEST_P(TorchAdamTest, SameStepsAsFusedTorchAdamAndAdamW) {
  at::set_num_threads(2);
  const CpuAdam adam({.threads = 2, .tile_elements = 4096});
  for (AdamMode mode : {AdamMode::kAdam, AdamMode::kAdamW}) {
    for (at::ScalarType grad_dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(std::string(mode == AdamMode::kAdam ? "Adam" : "AdamW") + " grads " +
                   element_type_name(element_type_of(grad_dtype)));
      at::manual_seed(7);
      at::Tensor torch_params = at::rand({kCount}) * 2 - 1;
      at::Tensor torch_m = at::zeros({kCount});
      at::Tensor torch_v = at::zeros({kCount});
      at::Tensor torch_step = at::zeros({1});
      at::Tensor params = torch_params.clone();
      at::Tensor m = at::zeros({kCount});
      at::Tensor v = at::zeros({kCount});
      at::Tensor params_bf16 = at::empty({kCount}, at::kBFloat16);
      at::Tensor params_f16 = at::empty({kCount}, at::kHalf);
      for (int k = 1; k <= kSteps; ++k) {
        const AdamHyperParams hp = schedule(mode, k);
        const at::Tensor grads = grads_of_step(k, grad_dtype);
        // torch: the optimizer's input is an fp32 grad.
        torch_fused_step(mode, hp, torch_params, grads.to(at::kFloat, false, /*copy=*/true), torch_m, torch_v,
                         torch_step);

        at::Tensor& params16 = k % 2 == 0 ? params_bf16 : params_f16;
        const AdamBuffers buffers{std::span<float>(params.data_ptr<float>(), kCount),
                                  const_view(grads),
                                  view(m),
                                  view(v),
                                  view(params16),
                                  {}};
        ASSERT_OK(adam.step(hp, k, static_cast<float>(1.0 / kLossScale), buffers));
        // The 16-bit copy is exactly torch's rounding of the new fp32 params.
        ASSERT_TRUE(at::equal(params16, params.to(params16.scalar_type()))) << "step " << k;
      }
      const double max_dp = (params - torch_params).abs().max().item<double>();
      const double max_dm = (m - torch_m).abs().max().item<double>();
      const double max_dv = (v - torch_v).abs().max().item<double>();
      EXPECT_TRUE(at::allclose(params, torch_params, 1e-6, 1e-7)) << "max |dp| " << max_dp;
      EXPECT_TRUE(at::allclose(m, torch_m, 1e-6, 1e-7)) << "max |dm| " << max_dm;
      EXPECT_TRUE(at::allclose(v, torch_v, 1e-6, 1e-12)) << "max |dv| " << max_dv;
      if (GetParam() & (HWY_AVX2 | HWY_AVX3)) {
        const int64_t body = kCount - kCount % 16;  // torch's vectorised part (its tail is scalar code)
        EXPECT_TRUE(at::equal(params.slice(0, 0, body), torch_params.slice(0, 0, body)));
        EXPECT_TRUE(at::equal(m.slice(0, 0, body), torch_m.slice(0, 0, body)));
        EXPECT_TRUE(at::equal(v.slice(0, 0, body), torch_v.slice(0, 0, body)));
      }
    }
  }
}

// 16-bit params, grads and moments against torch's fused kernel on bf16 tensors (what
// torch.optim.AdamW(fused=True) runs on a bf16 model): torch widens each to float, does the float
// operations of its fp32 kernel and rounds back to nearest even, as params_16bit does. With FMA
// (AVX2, AVX-512) every element is bit-identical over 30 steps; without, the multiply-adds round
// twice, and params and m may differ by one bf16 ulp at 1 (2^-7), v by 2^-7 relative.
TEST_P(TorchAdamTest, Bf16ParamsAndStateMatchFusedTorch) {
  at::set_num_threads(2);
  const CpuAdam adam({.threads = 2, .tile_elements = 4096});
  for (AdamMode mode : {AdamMode::kAdam, AdamMode::kAdamW}) {
    SCOPED_TRACE(mode == AdamMode::kAdam ? "Adam" : "AdamW");
    at::manual_seed(11);
    at::Tensor torch_params = (at::rand({kCount}) * 2 - 1).to(at::kBFloat16);
    at::Tensor torch_m = at::zeros({kCount}, at::kBFloat16);
    at::Tensor torch_v = at::zeros({kCount}, at::kBFloat16);
    at::Tensor torch_step = at::zeros({1});
    at::Tensor params = torch_params.clone();
    at::Tensor m = torch_m.clone();
    at::Tensor v = torch_v.clone();
    for (int k = 1; k <= kSteps; ++k) {
      const AdamHyperParams hp = schedule(mode, k);
      const at::Tensor grads = grads_of_step(k, at::kBFloat16);
      torch_fused_step(mode, hp, torch_params, grads.clone(), torch_m, torch_v, torch_step);
      const AdamBuffers buffers{{}, const_view(grads), view(m), view(v), {}, view(params)};
      ASSERT_OK(adam.step(hp, k, static_cast<float>(1.0 / kLossScale), buffers));
    }
    if (GetParam() & (HWY_AVX2 | HWY_AVX3)) {
      EXPECT_TRUE(at::equal(params, torch_params));
      EXPECT_TRUE(at::equal(m, torch_m));
      EXPECT_TRUE(at::equal(v, torch_v));
    } else {
      EXPECT_TRUE(at::allclose(params.to(at::kFloat), torch_params.to(at::kFloat), 0, 0x1p-7));
      const at::Tensor dm = (m.to(at::kFloat) - torch_m.to(at::kFloat)).abs();
      EXPECT_LE(dm.max().item<double>(), 0x1p-7);  // one bf16 ulp of the largest |m| (~1); m may cancel to ~0
      EXPECT_TRUE(at::allclose(v.to(at::kFloat), torch_v.to(at::kFloat), 0x1p-7, 1e-30));
    }
  }
}

}  // namespace
}  // namespace tierzero::cpu_adam
