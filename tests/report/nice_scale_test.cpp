// Axis ranges and tick labels: the ticks cover the data on 1/2/5 steps or powers of two.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "report/internal/nice_scale.h"

namespace tierzero::report::internal {
namespace {

bool is_nice(double step) {
  const double mantissa = step / std::pow(10.0, std::floor(std::log10(step)));
  return std::fabs(mantissa - 1) < 1e-9 || std::fabs(mantissa - 2) < 1e-9 || std::fabs(mantissa - 5) < 1e-9;
}

TEST(NiceScaleTest, LinearTicksCoverTheDataOnNiceSteps) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<double> exponent(-6, 12), unit(0, 1);
  for (int i = 0; i < 2000; ++i) {
    const double scale = std::pow(10.0, exponent(rng));
    double a = (unit(rng) - 0.3) * scale, b = (unit(rng) - 0.3) * scale;
    if (a > b) std::swap(a, b);
    const Ticks t = linear_ticks(a, b);
    ASSERT_LE(t.lo, a) << a << " " << b;
    ASSERT_GE(t.hi, b) << a << " " << b;
    ASSERT_TRUE(is_nice(t.step)) << t.step;
    ASSERT_GE(t.values.size(), 2u);
    ASSERT_LE(t.values.size(), 12u) << a << " " << b;
    EXPECT_LT(t.hi - t.lo, (b - a) * 2.6 + t.step) << a << " " << b;  // no wasted range
    EXPECT_DOUBLE_EQ(t.values.front(), t.lo);
    EXPECT_NEAR(t.values.back(), t.hi, t.step * 1e-9);
  }
}

TEST(NiceScaleTest, LinearExamples) {
  const Ticks loss = linear_ticks(2.31, 10.87);
  EXPECT_DOUBLE_EQ(loss.lo, 2);
  EXPECT_DOUBLE_EQ(loss.hi, 12);
  EXPECT_DOUBLE_EQ(loss.step, 2);
  const Ticks gbps = linear_ticks(0.8, 3.41, 6, true);
  EXPECT_DOUBLE_EQ(gbps.lo, 0);
  EXPECT_DOUBLE_EQ(gbps.hi, 4);
  EXPECT_DOUBLE_EQ(gbps.step, 1);
  const Ticks flat = linear_ticks(5, 5);
  EXPECT_LT(flat.lo, 5);
  EXPECT_GT(flat.hi, 5);
  const Ticks zero = linear_ticks(0, 0, 6, true);
  EXPECT_DOUBLE_EQ(zero.lo, 0);
  EXPECT_GT(zero.hi, 0);
}

TEST(NiceScaleTest, AMinimumRelativeSpanWidensANarrowRangeAroundItsMiddle) {
  const Ticks flat = linear_ticks(2.299, 2.301, 6, false, 0.1);
  EXPECT_GE(flat.hi - flat.lo, 0.2301);
  EXPECT_LE(flat.lo, 2.3 - 0.23 / 2);
  EXPECT_GE(flat.hi, 2.3 + 0.23 / 2);
  EXPECT_LT(flat.hi - flat.lo, 0.5);
  const Ticks narrow = linear_ticks(2.299, 2.301);  // without the span: the noise fills the axis
  EXPECT_LT(narrow.hi - narrow.lo, 0.01);
  const Ticks wide = linear_ticks(2.31, 10.87, 6, false, 0.1);  // wide enough already: unchanged
  EXPECT_DOUBLE_EQ(wide.lo, 2);
  EXPECT_DOUBLE_EQ(wide.hi, 12);
  const Ticks single = linear_ticks(4, 4, 6, false, 0.1);
  EXPECT_LE(single.lo, 3.8 + 1e-12);
  EXPECT_GE(single.hi, 4.2 - 1e-12);
}

TEST(NiceScaleTest, Log2TicksArePowersOfTwoAroundTheData) {
  const Ticks blocks = log2_ticks(256 << 10, 4 << 20);
  EXPECT_DOUBLE_EQ(blocks.lo, 256 << 10);
  EXPECT_DOUBLE_EQ(blocks.hi, 4 << 20);
  EXPECT_EQ(blocks.values.size(), 5u);
  const Ticks threads = log2_ticks(1, 12);
  EXPECT_DOUBLE_EQ(threads.lo, 1);
  EXPECT_DOUBLE_EQ(threads.hi, 16);
  const Ticks one = log2_ticks(8, 8);
  EXPECT_LE(one.lo, 8);
  EXPECT_GT(one.hi, 8);
  const Ticks wide = log2_ticks(1, 1 << 30);
  EXPECT_LE(wide.values.size(), 17u);
  EXPECT_DOUBLE_EQ(wide.hi, 1 << 30);
}

TEST(NiceScaleTest, TickLabels) {
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(1.5, 0.5), "1.5");
  EXPECT_EQ(format_tick(20, 5), "20");
  EXPECT_EQ(format_tick(-0.0, 0.5), "0");
  EXPECT_EQ(format_tick(2000000, 500000), "2.0M");
  EXPECT_EQ(format_tick(3000000, 1000000), "3M");
  EXPECT_EQ(format_tick(40000, 10000), "40k");
  EXPECT_EQ(format_tick(0.0002, 0.0001), "2.0e-04");
  EXPECT_EQ(format_bytes_tick(262144), "256K");
  EXPECT_EQ(format_bytes_tick(1 << 20), "1M");
  EXPECT_EQ(format_bytes_tick(1.5 * (1 << 30)), "1.5G");
  EXPECT_EQ(format_bytes_tick(512), "512");
}

}  // namespace
}  // namespace tierzero::report::internal
