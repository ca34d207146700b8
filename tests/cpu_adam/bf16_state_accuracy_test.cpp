// What bf16 moments cost in accuracy, measured: the same noisy, ill-conditioned quadratic trained
// with fp32 and with bf16 m and v (cpu_adam/README.md quotes the figures this test prints).
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cpu_adam/adam.h"
#include "tests/cpu_adam/reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

constexpr size_t kCount = 4096;
constexpr int kSteps = 2000;

struct Problem {
  std::vector<float> target, curvature;  // f(p) = sum curvature_i * (p_i - target_i)^2 / 2
};

Problem make_problem() {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Problem p;
  for (size_t i = 0; i < kCount; ++i) {
    p.target.push_back(uniform(rng));
    p.curvature.push_back(std::pow(10.0f, 2.0f * uniform(rng)));  // 0.01 .. 100
  }
  return p;
}

// Trains from p = 0 with AdamW (cosine lr 1e-2 -> 1e-4) on bf16 gradients with noise of 0.1 per
// element, and returns the final params.
std::vector<float> train(ElementType state_type, const Problem& problem) {
  const CpuAdam adam({.threads = 2});
  std::vector<float> params(kCount, 0.0f);
  reference::TypedBuffer grads(ElementType::kBF16, kCount), m(state_type, kCount), v(state_type, kCount);
  for (size_t i = 0; i < kCount; ++i) {
    m.set(i, 0.0f);
    v.set(i, 0.0f);
  }
  std::mt19937 rng(6);
  std::normal_distribution<float> noise(0.0f, 0.1f);
  for (int k = 1; k <= kSteps; ++k) {
    for (size_t i = 0; i < kCount; ++i) {
      grads.set(i, problem.curvature[i] * (params[i] - problem.target[i]) + noise(rng));
    }
    AdamHyperParams hp;
    hp.lr = 1e-4 + 0.5 * (1e-2 - 1e-4) * (1 + std::cos(M_PI * k / kSteps));
    const AdamBuffers buffers{params, grads.const_view(), m.view(), v.view(), {}, {}};
    EXPECT_OK(adam.step(hp, k, 1.0f, buffers));
  }
  return params;
}

double rms(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
  return std::sqrt(sum / static_cast<double>(a.size()));
}

// bf16 moments reach the optimum about as closely as fp32 ones: their final RMS distance to the
// target stays within 1.5x of fp32's, and the two runs end within 1e-2 RMS of each other.
TEST(Bf16StateAccuracy, NoisyQuadraticConvergesLikeFp32State) {
  const Problem problem = make_problem();
  const std::vector<float> with_fp32 = train(ElementType::kF32, problem);
  const std::vector<float> with_bf16 = train(ElementType::kBF16, problem);
  const double err_fp32 = rms(with_fp32, problem.target);
  const double err_bf16 = rms(with_bf16, problem.target);
  const double apart = rms(with_fp32, with_bf16);
  std::printf("RMS distance to optimum after %d steps: fp32 state %.3e, bf16 state %.3e; runs apart %.3e\n", kSteps,
              err_fp32, err_bf16, apart);
  EXPECT_LT(err_bf16, 1.5 * err_fp32);
  EXPECT_LT(apart, 1e-2);
}

}  // namespace
}  // namespace tierzero::cpu_adam
