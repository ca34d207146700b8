#include "tests/common/float16_reference.h"

#include <bit>
#include <cmath>

namespace tierzero::reference {

float f16_bits_to_float(uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }

uint16_t float_to_f16_bits(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16_bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const auto down = static_cast<uint16_t>(bits >> 16);  // truncation: toward zero
  if ((bits & 0xFFFF) == 0) return down;
  const auto up = static_cast<uint16_t>(down + 1);  // away from zero (may become inf)
  const double below = std::fabs(static_cast<double>(bf16_bits_to_float(down)) - f);
  const double above = std::fabs(static_cast<double>(bf16_bits_to_float(up)) - f);
  if (std::isinf(bf16_bits_to_float(up))) {
    // Past the largest bf16 by half an ulp or more rounds to inf, as for any binary format.
    const double half_ulp_past_max = std::ldexp(1.0, 127) * (2.0 - std::ldexp(1.0, -8));
    return std::fabs(static_cast<double>(f)) >= half_ulp_past_max ? up : down;
  }
  if (below < above) return down;
  if (above < below) return up;
  return (down & 1) == 0 ? down : up;
}

}  // namespace tierzero::reference
