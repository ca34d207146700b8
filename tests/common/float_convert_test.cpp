// The one fp32 <-> 16-bit converter (common/common-inl.h and its bulk, dispatched form
// float_convert.h), bit for bit against the scalar reference of float16_reference.h:
// - on every compiled Highway target, every fp16 and bf16 bit pattern decoded exactly, and rounding
//   checked on every fp16/bf16 rounding boundary (ties and their neighbours), special values and
//   random floats, through whole vectors and one-lane remainders as the kernels use them;
// - the dispatched bulk functions on the same probes at odd lengths and unaligned 16-bit buffers,
//   round trips of every value, rounding to the nearer neighbour against double arithmetic, and the
//   ties, specials and overflow PyTorch's .to(dtype) gives.
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/common/float_convert_test.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "common/common-inl.h"
#include "common/common.h"
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/common/float16_reference.h"

#ifndef TIERZERO_FLOAT_CONVERT_TEST_ONCE
#define TIERZERO_FLOAT_CONVERT_TEST_ONCE
namespace tierzero::float_convert_test {

inline bool same_float(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Equal bits, or for a NaN input any quiet NaN of the input's sign.
inline bool same_16(uint16_t got, uint16_t want, float in, bool bf16) {
  if (!std::isnan(in)) return got == want;
  const uint16_t exp_mask = bf16 ? 0x7F80 : 0x7C00;
  const uint16_t quiet_bit = bf16 ? 0x40 : 0x200;
  return (got & exp_mask) == exp_mask && (got & quiet_bit) != 0 && (got & 0x8000) == (want & 0x8000);
}

inline std::vector<uint16_t> all_16_bit_patterns() {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  return bits;
}

// For every 16-bit value h of a format: h's float value, the midpoint to its upper neighbour
// (a tie), and the floats one ulp either side of that midpoint; plus specials and random floats.
inline std::vector<float> rounding_probes(bool bf16) {
  std::vector<float> probes = {0.0f,
                               -0.0f,
                               INFINITY,
                               -INFINITY,
                               NAN,
                               -NAN,
                               3.4028235e38f,
                               -3.4028235e38f,
                               65504.0f,
                               65519.996f,
                               65520.0f,
                               1e-8f,
                               5.96e-8f,
                               2.98e-8f,
                               1e-45f,
                               std::bit_cast<float>(0x7F800001u),
                               std::bit_cast<float>(0xFFFFFFFFu)};
  for (uint32_t h = 0; h < 0x7FFF; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const auto next = static_cast<uint16_t>(h + 1);
    const float lo = bf16 ? reference::bf16_bits_to_float(bits) : reference::f16_bits_to_float(bits);
    const float hi = bf16 ? reference::bf16_bits_to_float(next) : reference::f16_bits_to_float(next);
    if (!std::isfinite(lo) || !std::isfinite(hi)) continue;
    const auto mid = static_cast<float>((static_cast<double>(lo) + hi) / 2);
    for (float f : {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      probes.push_back(f);
      probes.push_back(-f);
    }
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 100000; ++i) probes.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng())));
  return probes;
}

inline uint16_t reference_round(float f, bool bf16) {
  return bf16 ? reference::float_to_bf16_bits(f) : reference::float_to_f16_bits(f);
}

inline float reference_widen(uint16_t h, bool bf16) {
  return bf16 ? reference::bf16_bits_to_float(h) : reference::f16_bits_to_float(h);
}

}  // namespace tierzero::float_convert_test
#endif  // TIERZERO_FLOAT_CONVERT_TEST_ONCE

// ---- Every Highway target: the per-target vector conversions ----------------------------------
HWY_BEFORE_NAMESPACE();
namespace tierzero::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace tierzero::float_convert_test;

// Walks `count` elements as the kernels do: convert(d, i) for each full vector of tag d starting at
// element i, then for each remaining element with a one-lane tag.
template <class Convert>
void for_each_vector(size_t count, const Convert& convert) {
  const hn::ScalableTag<float> df;
  size_t i = 0;
  for (; i + hn::Lanes(df) <= count; i += hn::Lanes(df)) convert(df, i);
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) convert(d1, i);
}

// `in` widened to fp32 by LoadAsF32.
template <ElementType kType>
std::vector<float> decode(const std::vector<uint16_t>& in) {
  std::vector<float> out(in.size());
  for_each_vector(in.size(),
                  [&](auto d, size_t i) { hn::StoreU(LoadAsF32<kType>(d, in.data(), i), d, out.data() + i); });
  return out;
}

// `in` rounded to kType by StoreFromF32.
template <ElementType kType>
std::vector<uint16_t> encode(const std::vector<float>& in) {
  std::vector<uint16_t> out(in.size());
  for_each_vector(in.size(),
                  [&](auto d, size_t i) { StoreFromF32<kType>(d, hn::LoadU(d, in.data() + i), out.data(), i); });
  return out;
}

void TestDecodesEveryBitPattern() {
  const std::vector<uint16_t> bits = all_16_bit_patterns();
  const std::vector<float> from_f16 = decode<ElementType::kF16>(bits);
  const std::vector<float> from_bf16 = decode<ElementType::kBF16>(bits);
  for (size_t i = 0; i < bits.size(); ++i) {
    ASSERT_TRUE(same_float(from_f16[i], reference::f16_bits_to_float(bits[i]))) << "fp16 bits " << bits[i];
    ASSERT_TRUE(same_float(from_bf16[i], reference::bf16_bits_to_float(bits[i]))) << "bf16 bits " << bits[i];
  }
}

void TestRoundsToNearestEven() {
  for (bool bf16 : {false, true}) {
    const std::vector<float> probes = rounding_probes(bf16);
    const std::vector<uint16_t> got = bf16 ? encode<ElementType::kBF16>(probes) : encode<ElementType::kF16>(probes);
    for (size_t i = 0; i < probes.size(); ++i) {
      const uint16_t want = reference_round(probes[i], bf16);
      ASSERT_TRUE(same_16(got[i], want, probes[i], bf16))
          << (bf16 ? "bf16" : "fp16") << " of " << probes[i] << " (bits " << std::bit_cast<uint32_t>(probes[i])
          << "): got " << got[i] << ", want " << want;
    }
  }
}

}  // namespace tierzero::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tierzero {

class FloatConvertTargetTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(FloatConvertTargetTest);
HWY_EXPORT_AND_TEST_P(FloatConvertTargetTest, TestDecodesEveryBitPattern);
HWY_EXPORT_AND_TEST_P(FloatConvertTargetTest, TestRoundsToNearestEven);

// ---- The dispatched bulk functions ------------------------------------------------------------
namespace {
using namespace float_convert_test;

uint16_t to_16(float f, bool bf16) {
  uint16_t h;
  (bf16 ? floats_to_bf16 : floats_to_fp16)(std::span(&f, 1), &h);
  return h;
}

float from_16(uint16_t h, bool bf16) {
  float f;
  (bf16 ? bf16_to_floats : fp16_to_floats)(&h, std::span(&f, 1));
  return f;
}

// The probes through the bulk functions, written one byte past an aligned address and read back
// from there, at lengths that leave every remainder of the vector width.
TEST(FloatConvert, BulkMatchesTheReferenceAtAnyLengthAndAlignment) {
  for (bool bf16 : {false, true}) {
    const std::vector<float> probes = rounding_probes(bf16);
    for (size_t length : {size_t{0}, size_t{1}, size_t{7}, size_t{17}, size_t{33}, probes.size()}) {
      std::vector<std::byte> bytes(2 * length + 1);
      (bf16 ? floats_to_bf16 : floats_to_fp16)(std::span(probes.data(), length), bytes.data() + 1);
      std::vector<float> back(length);
      (bf16 ? bf16_to_floats : fp16_to_floats)(bytes.data() + 1, back);
      for (size_t i = 0; i < length; ++i) {
        uint16_t got;
        std::memcpy(&got, bytes.data() + 1 + 2 * i, 2);
        const uint16_t want = reference_round(probes[i], bf16);
        ASSERT_TRUE(same_16(got, want, probes[i], bf16))
            << (bf16 ? "bf16" : "fp16") << " of " << probes[i] << " at " << i << " of " << length;
        ASSERT_TRUE(same_float(back[i], reference_widen(got, bf16))) << (bf16 ? "bf16" : "fp16") << " bits " << got;
      }
    }
  }
}

TEST(FloatConvert, Fp16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = from_16(static_cast<uint16_t>(h), false);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(from_16(to_16(f, false), false))) << h;
    } else {
      EXPECT_EQ(to_16(f, false), h) << h;
    }
  }
}

TEST(FloatConvert, Bf16RoundTripsEveryBfloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = from_16(static_cast<uint16_t>(h), true);
    if (!std::isnan(f)) {
      EXPECT_EQ(to_16(f, true), h) << h;
    }
  }
}

// Every float rounds to the nearer of its two neighbours; ties go to the even one.
TEST(FloatConvert, RoundsToNearestEvenAgainstADoubleReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(bits(rng));
    if (std::isnan(f) || std::isinf(f)) continue;
    auto check = [&](uint16_t got, bool bf16) {
      const double x = f;
      const double g = from_16(got, bf16);
      if (std::isinf(g)) return;  // overflow handled separately
      const uint16_t other = static_cast<uint16_t>(g == 0 ? got ^ 1 : (std::abs(g) < std::abs(x) ? got + 1 : got - 1));
      const double o = from_16(other, bf16);
      if (std::isnan(o) || std::isinf(o)) return;
      const double dg = std::abs(g - x), dof = std::abs(o - x);
      ASSERT_LE(dg, dof) << f;
      if (dg == dof) {
        ASSERT_EQ(got & 1, 0) << f;
      }
    };
    check(to_16(f, true), true);
    if (std::abs(f) < 65504.0f) check(to_16(f, false), false);
  }
}

TEST(FloatConvert, TiesSpecialsAndOverflow) {
  EXPECT_EQ(to_16(std::bit_cast<float>(0x3f808000u), true), 0x3f80);  // tie, even below
  EXPECT_EQ(to_16(std::bit_cast<float>(0x3f818000u), true), 0x3f82);  // tie, even above
  EXPECT_EQ(to_16(65504.0f, false), 0x7bff);
  EXPECT_EQ(to_16(65520.0f, false), 0x7c00);  // rounds to infinity
  EXPECT_EQ(to_16(-std::numeric_limits<float>::infinity(), false), 0xfc00);
  EXPECT_EQ(to_16(std::bit_cast<float>(0x33000000u), false), 0x0000);  // 2^-25: tie between 0 and min subnormal
  EXPECT_EQ(to_16(std::bit_cast<float>(0x33000001u), false), 0x0001);
  EXPECT_EQ(to_16(std::numeric_limits<float>::max(), true), 0x7f80);  // overflow rounds to infinity
  EXPECT_TRUE(std::isnan(from_16(to_16(std::numeric_limits<float>::quiet_NaN(), true), true)));
  EXPECT_TRUE(std::isnan(from_16(to_16(std::numeric_limits<float>::quiet_NaN(), false), false)));
  EXPECT_EQ(to_16(-std::numeric_limits<float>::quiet_NaN(), true) & 0x8000, 0x8000);  // sign kept
  EXPECT_EQ(to_16(-std::numeric_limits<float>::quiet_NaN(), false) & 0x8000, 0x8000);
  EXPECT_EQ(to_16(std::bit_cast<float>(0x7f800001u), true), 0x7fc0);  // signalling NaN comes out quiet
  EXPECT_EQ(to_16(-0.0f, false), 0x8000);
}

}  // namespace
}  // namespace tierzero
#endif  // HWY_ONCE
