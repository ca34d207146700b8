// CpuAdam::accumulate_scaled, the accumulation of offloaded gradients: dst += src * scale on every
// compiled Highway target, against a double reference, with the squared norm of the result.
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu_adam/adam.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/cpu_adam/accumulate_check.h"
#include "tests/cpu_adam/reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

using reference::TypedBuffer;

constexpr ElementType kAllTypes[] = {ElementType::kF32, ElementType::kBF16, ElementType::kF16};

class AccumulateTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(AccumulateTest);

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Every element equals float(dst + float(src * scale)) computed in double (the product of two
// floats and the sum of two floats of similar size are exact in double, so one rounding each), for
// lengths that are not multiples of the vector; the norm is the double sum of the new squares,
// bit-identical to grad_stats() of the result and the same for 1 and 2 threads.
TEST_P(AccumulateTest, MatchesDoubleReferenceAndGradStats) {
  const CpuAdam two({.threads = 2, .tile_elements = 64});
  const CpuAdam one({.threads = 1, .tile_elements = 64});
  for (ElementType type : kAllTypes) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{63}, size_t{64}, size_t{1001}, size_t{70001}}) {
      SCOPED_TRACE(std::string(element_type_name(type)) + " n " + std::to_string(n));
      TypedBuffer src(type, n);
      const std::vector<float> values = random_floats(n, static_cast<uint32_t>(n) + 1);
      for (size_t i = 0; i < n; ++i) src.set(i, values[i]);
      std::vector<float> dst = random_floats(n, static_cast<uint32_t>(n) + 2);
      const float scale = 0.37f;
      const auto want = [&](const std::vector<float>& before, size_t i) {
        return reference::accumulate_scaled(before[i], src.get(i), scale);
      };
      const auto value = [](float x) { return static_cast<double>(x); };
      double sq_norm = 0.0;
      ASSERT_NO_FATAL_FAILURE(reference::check_accumulate(two, one, dst, src, scale, 1e-13, want, value, sq_norm));
      EXPECT_EQ(sq_norm, two.grad_stats(const_elements(std::span<const float>(dst))).sq_norm);
    }
  }
}

// An inf or NaN in the source, anywhere, makes the result non-finite and is reported.
TEST_P(AccumulateTest, ReportsNonFiniteResults) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  for (ElementType type : kAllTypes) {
    for (size_t at : {size_t{0}, size_t{517}, size_t{1000}}) {
      TypedBuffer src(type, 1001);
      src.set(at, std::numeric_limits<float>::infinity());
      std::vector<float> dst(1001, 1.0f);
      const Result<GradStats> stats = adam.accumulate_scaled(std::span<float>(dst), src.const_view(), 1.0f);
      ASSERT_OK(stats);
      EXPECT_FALSE(stats->finite) << element_type_name(type) << " at " << at;
    }
  }
}

TEST(AccumulateRefusals, RefusesMismatchedCounts) {
  const CpuAdam adam({.threads = 1});
  std::vector<float> dst(10), src(9);
  EXPECT_ERROR(adam.accumulate_scaled(std::span<float>(dst), const_elements(std::span<const float>(src)), 1.0f),
               ErrorCode::kInvalidArgument, "src has 9 elements but dst has 10");
}

}  // namespace
}  // namespace tierzero::cpu_adam
