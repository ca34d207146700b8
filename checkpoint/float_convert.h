// fp32 <-> bf16 / fp16 conversion, round-to-nearest-even, as PyTorch's .to(dtype) does it.
// NaN stays NaN (quiet, sign kept); values beyond the 16-bit range become infinity.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace tierzero::checkpoint {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Rounds `f` to bfloat16 (round to nearest, ties to even).
inline uint16_t float_to_bf16(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

// Rounds `f` to IEEE binary16 (round to nearest, ties to even; subnormals exact).
// After F. Giesen's float_to_half_fast3_rtne (public domain).
inline uint16_t float_to_fp16(float f) {
  constexpr uint32_t kF32Infinity = 255u << 23;
  constexpr uint32_t kF16Overflow = (127u + 16u) << 23;  // 65536: at or above is inf/NaN
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  uint32_t u = float_bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint32_t out;
  if (u >= kF16Overflow) {
    out = u > kF32Infinity ? 0x7e00u : 0x7c00u;
  } else if (u < (113u << 23)) {  // below 2^-14: an fp16 subnormal or zero
    const float sum = bits_float(u) + bits_float(kDenormMagic);  // the FPU rounds to even
    out = float_bits(sum) - kDenormMagic;
  } else {
    const uint32_t mantissa_odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mantissa_odd;
    out = u >> 13;
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

// Widens an IEEE binary16 to float exactly.
inline float fp16_to_float(uint16_t h) {
  constexpr uint32_t kShiftedExponent = 0x7c00u << 13;
  uint32_t u = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exponent = u & kShiftedExponent;
  u += static_cast<uint32_t>(127 - 15) << 23;
  if (exponent == kShiftedExponent) {
    u += static_cast<uint32_t>(128 - 16) << 23;  // inf / NaN
  } else if (exponent == 0) {
    u += 1u << 23;  // subnormal: renormalise
    u = float_bits(bits_float(u) - bits_float(113u << 23));
  }
  return bits_float(u | ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

// Bulk forms; `out` must be as long as `in`.
void floats_to_bf16(std::span<const float> in, std::span<uint16_t> out);
void floats_to_fp16(std::span<const float> in, std::span<uint16_t> out);
void bf16_to_floats(std::span<const uint16_t> in, std::span<float> out);
void fp16_to_floats(std::span<const uint16_t> in, std::span<float> out);

}  // namespace tierzero::checkpoint
