// The 16-bit conversions of convert-inl.h on every compiled Highway target, against the scalar
// references: every fp16 and bf16 bit pattern decoded exactly; rounding to fp16 and bf16 checked on
// every fp16/bf16 rounding boundary (ties and their neighbours), special values and random floats.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/cpu_adam/convert_test.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "cpu_adam/internal/convert-inl.h"
#include "hwy/highway.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/cpu_adam/reference.h"

HWY_BEFORE_NAMESPACE();
namespace tierzero::cpu_adam::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

bool same_float(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

bool same_16(uint16_t got, uint16_t want, bool is_nan, bool bf16) {
  if (!is_nan) return got == want;
  const uint16_t exp_mask = bf16 ? 0x7F80 : 0x7C00;
  return (got & exp_mask) == exp_mask && (got & ~exp_mask & 0x7FFF) != 0;
}

// Converts `in` with full vectors and a one-lane remainder, as the kernels do.
template <ElementType kType>
std::vector<float> decode(const std::vector<uint16_t>& in) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  std::vector<float> out(in.size());
  size_t i = 0;
  for (; i + lanes <= in.size(); i += lanes) hn::StoreU(LoadAsF32<kType>(df, in.data(), i), df, out.data() + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < in.size(); ++i) hn::StoreU(LoadAsF32<kType>(d1, in.data(), i), d1, out.data() + i);
  return out;
}

template <ElementType kType>
std::vector<uint16_t> encode(const std::vector<float>& in) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  std::vector<uint16_t> out(in.size());
  size_t i = 0;
  for (; i + lanes <= in.size(); i += lanes) StoreFromF32<kType>(df, hn::LoadU(df, in.data() + i), out.data(), i);
  const hn::CappedTag<float, 1> d1;
  for (; i < in.size(); ++i) StoreFromF32<kType>(d1, hn::LoadU(d1, in.data() + i), out.data(), i);
  return out;
}

std::vector<uint16_t> all_16_bit_patterns() {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(i);
  return bits;
}

// For every 16-bit value h of a format: h's float value, the midpoint to its upper neighbour
// (a tie), and the floats one ulp either side of that midpoint; plus specials and random floats.
std::vector<float> rounding_probes(bool bf16) {
  std::vector<float> probes = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 3.4028235e38f, -3.4028235e38f,
                               65504.0f, 65519.996f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 1e-45f};
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
      const uint16_t want = bf16 ? reference::float_to_bf16_bits(probes[i]) : reference::float_to_f16_bits(probes[i]);
      ASSERT_TRUE(same_16(got[i], want, std::isnan(probes[i]), bf16))
          << (bf16 ? "bf16" : "fp16") << " of " << probes[i] << " (bits " << std::bit_cast<uint32_t>(probes[i])
          << "): got " << got[i] << ", want " << want;
    }
  }
}

}  // namespace tierzero::cpu_adam::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tierzero::cpu_adam {

class ConvertTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(ConvertTest);
HWY_EXPORT_AND_TEST_P(ConvertTest, TestDecodesEveryBitPattern);
HWY_EXPORT_AND_TEST_P(ConvertTest, TestRoundsToNearestEven);

}  // namespace tierzero::cpu_adam
#endif  // HWY_ONCE
