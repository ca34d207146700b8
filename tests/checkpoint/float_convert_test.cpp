#include "checkpoint/float_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tierzero::checkpoint {
namespace {

TEST(FloatConvert, Fp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f)))) << h;
    } else {
      EXPECT_EQ(float_to_fp16(f), h) << h;
    }
  }
}

TEST(FloatConvert, Bf16RoundTripsEveryBfloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      EXPECT_EQ(float_to_bf16(f), h) << h;
    }
  }
}

// Every float rounds to the nearer of its two neighbours; ties go to the even one.
TEST(FloatConvert, RoundsToNearestEvenAgainstADoubleReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_float(bits(rng));
    if (std::isnan(f) || std::isinf(f)) continue;
    auto check = [&](uint16_t got, auto to_float) {
      const double x = f;
      const double g = to_float(got);
      if (std::isinf(g)) return;  // overflow handled separately
      const uint16_t other = static_cast<uint16_t>(g == 0 ? got ^ 1 : (std::abs(g) < std::abs(x) ? got + 1 : got - 1));
      const double o = to_float(other);
      if (std::isnan(o) || std::isinf(o)) return;
      const double dg = std::abs(g - x), dof = std::abs(o - x);
      ASSERT_LE(dg, dof) << f;
      if (dg == dof) {
        ASSERT_EQ(got & 1, 0) << f;
      }
    };
    check(float_to_bf16(f), bf16_to_float);
    if (std::abs(f) < 65504.0f) check(float_to_fp16(f), fp16_to_float);
  }
}

TEST(FloatConvert, TiesSpecialsAndOverflow) {
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(float_to_fp16(bits_float(0x33000000u)), 0x0000);  // 2^-25: tie between 0 and min subnormal
  EXPECT_EQ(float_to_fp16(bits_float(0x33000001u)), 0x0001);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
}

}  // namespace
}  // namespace tierzero::checkpoint
