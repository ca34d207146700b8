// The check shared by the accumulate_scaled tests (fp32 dst: accumulate_test.cpp; bf16 dst:
// compact_master_test.cpp).
#pragma once

#include <span>
#include <vector>

#include "cpu_adam/adam.h"
#include "gtest/gtest.h"
#include "tests/cpu_adam/reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam::reference {

// Runs two.accumulate_scaled(dst, src, scale) and checks every element of dst against want(before,
// i) (the old dst and the index; an element as its type's bits) and the squared norm against the
// double sum of the wanted elements' squares, as value(element) decodes them (relative
// `tolerance`); then one.accumulate_scaled on a copy of the old dst must give the same elements and
// norm. Sets `sq_norm` to the norm. Call through ASSERT_NO_FATAL_FAILURE.
template <class T, class Want, class Value>
void check_accumulate(const CpuAdam& two, const CpuAdam& one, std::vector<T>& dst, const TypedBuffer& src, float scale,
                      double tolerance, const Want& want, const Value& value, double& sq_norm) {
  const std::vector<T> before = dst;
  const Result<GradStats> stats = two.accumulate_scaled(std::span<T>(dst), src.const_view(), scale);
  ASSERT_OK(stats);
  double sq = 0.0;
  for (size_t i = 0; i < dst.size(); ++i) {
    const T w = want(before, i);
    ASSERT_EQ(dst[i], w) << "element " << i;
    const double v = value(w);
    sq += v * v;
  }
  EXPECT_TRUE(stats->finite);
  EXPECT_NEAR(stats->sq_norm, sq, tolerance * sq);
  sq_norm = stats->sq_norm;

  std::vector<T> again = before;
  const Result<GradStats> single = one.accumulate_scaled(std::span<T>(again), src.const_view(), scale);
  ASSERT_OK(single);
  EXPECT_EQ(again, dst);
  EXPECT_EQ(single->sq_norm, stats->sq_norm);
}

}  // namespace tierzero::cpu_adam::reference
