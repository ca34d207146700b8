// The gradient pre-pass (squared norm, inf/NaN flag) and step_with_clipping(), on every compiled
// Highway target.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_adam/adam.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/cpu_adam/reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

using reference::TypedBuffer;

constexpr ElementType kAllTypes[] = {ElementType::kF32, ElementType::kBF16, ElementType::kF16};

TypedBuffer random_grads(ElementType type, size_t n, uint32_t seed) {
  TypedBuffer grads(type, n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (size_t i = 0; i < n; ++i) grads.set(i, normal(rng));
  return grads;
}

double reference_sq_norm(const TypedBuffer& grads) {
  double sum = 0.0;
  for (size_t i = 0; i < grads.size(); ++i) sum += static_cast<double>(grads.get(i)) * grads.get(i);
  return sum;
}

class GradStatsTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(GradStatsTest);

// The squared norm equals the double sum of the decoded squares (exact in double; only the
// summation order differs), for any length and tiling, and does not depend on the thread count.
TEST_P(GradStatsTest, SquaredNormMatchesDoubleSum) {
  const CpuAdam two({.threads = 2, .tile_elements = 64});
  const CpuAdam one({.threads = 1, .tile_elements = 64});
  for (ElementType type : kAllTypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{63}, size_t{64}, size_t{1001}, size_t{70000}}) {
      SCOPED_TRACE(std::string(element_type_name(type)) + " n " + std::to_string(n));
      const TypedBuffer grads = random_grads(type, n, static_cast<uint32_t>(n));
      const GradStats stats = two.grad_stats(grads.const_view());
      EXPECT_TRUE(stats.finite);
      EXPECT_NEAR(stats.sq_norm, reference_sq_norm(grads), 1e-13 * reference_sq_norm(grads));
      EXPECT_EQ(stats.sq_norm, one.grad_stats(grads.const_view()).sq_norm);
    }
  }
}

// Finite fp32 gradients whose squares overflow float still give a finite norm.
TEST_P(GradStatsTest, HugeFiniteFp32GradientsDoNotOverflow) {
  const CpuAdam adam({.threads = 2});
  std::vector<float> grads(100, 3e38f);
  const GradStats stats = adam.grad_stats(const_elements(std::span<const float>(grads)));
  EXPECT_TRUE(stats.finite);
  EXPECT_NEAR(stats.sq_norm, 100 * 9e76, 1e-6 * 100 * 9e76);
}

// One inf or NaN anywhere (first element, a vector body, the scalar tail) clears `finite`.
TEST_P(GradStatsTest, DetectsInfAndNanAnywhere) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  const size_t n = 1001;
  const float specials[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (ElementType type : kAllTypes) {
    for (float special : specials) {
      for (size_t at : {size_t{0}, size_t{517}, n - 1}) {
        SCOPED_TRACE(std::string(element_type_name(type)) + " value " + std::to_string(special) + " at " +
                     std::to_string(at));
        TypedBuffer grads = random_grads(type, n, 3);
        grads.set(at, special);
        EXPECT_FALSE(adam.grad_stats(grads.const_view()).finite);
      }
    }
  }
}

struct FlatState {
  explicit FlatState(size_t n) : params(n, 0.5f), exp_avg(n, 0.1f), exp_avg_sq(n, 0.01f), params16(n, 0) {}
  AdamBuffers buffers(const TypedBuffer& grads) {
    return {params,
            grads.const_view(),
            elements(std::span<float>(exp_avg)),
            elements(std::span<float>(exp_avg_sq)),
            elements(std::span<uint16_t>(params16), ElementType::kBF16),
            {}};
  }
  bool operator==(const FlatState&) const = default;
  std::vector<float> params, exp_avg, exp_avg_sq;
  std::vector<uint16_t> params16;
};

// A non-finite gradient skips the step: params, moments and the 16-bit copy keep every bit.
TEST_P(GradStatsTest, NonFiniteGradientSkipsStepWithoutTouchingState) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  for (ElementType type : kAllTypes) {
    TypedBuffer grads = random_grads(type, 300, 11);
    grads.set(299, std::numeric_limits<float>::quiet_NaN());
    FlatState state(300);
    const FlatState before = state;
    const Result<ClippedStepOutcome> outcome = adam.step_with_clipping({}, 1, 1024.0, 1.0, state.buffers(grads));
    ASSERT_OK(outcome);
    EXPECT_TRUE(outcome->skipped);
    EXPECT_TRUE(state == before) << element_type_name(type);
  }
}

// With a finite gradient, the clip coefficient is torch's clip_grad_norm_ on the unscaled norm, and
// the update is step() with grad_multiplier = clip_coef / loss_scale.
TEST_P(GradStatsTest, ClippedStepUsesUnscaledNormAndOneMultiplier) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  const double loss_scale = 512.0;
  for (ElementType type : kAllTypes) {
    const TypedBuffer grads = random_grads(type, 300, 12);
    const double norm = std::sqrt(reference_sq_norm(grads)) / loss_scale;
    for (double max_norm : {0.0, norm / 4, norm * 4}) {
      FlatState clipped(300), direct(300);
      const Result<ClippedStepOutcome> outcome =
          adam.step_with_clipping({}, 3, loss_scale, max_norm, clipped.buffers(grads));
      ASSERT_OK(outcome);
      EXPECT_FALSE(outcome->skipped);
      EXPECT_NEAR(outcome->grad_norm, norm, 1e-12 * norm);
      const double want_coef = max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
      EXPECT_NEAR(outcome->clip_coef, want_coef, 1e-12);
      ASSERT_OK(adam.step({}, 3, static_cast<float>(outcome->clip_coef / loss_scale), direct.buffers(grads)));
      EXPECT_TRUE(clipped == direct);
    }
  }
}

}  // namespace
}  // namespace tierzero::cpu_adam
