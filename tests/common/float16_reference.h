// Scalar 16-bit float conversions written independently of common/float_convert: fp16 through the
// compiler's _Float16, bf16 by choosing the nearer neighbour in double. The reference the SIMD
// converters and the kernels built on them are tested against.
#pragma once

#include <cstdint>

namespace tierzero::reference {

// Exact value of fp16 bits.
float f16_bits_to_float(uint16_t bits);
// fp16 bits nearest to `f` (ties to even), inf on overflow, a NaN for NaN.
uint16_t float_to_f16_bits(float f);
// Exact value of bf16 bits.
float bf16_bits_to_float(uint16_t bits);
// bf16 bits nearest to `f` (ties to even), inf on overflow, a NaN for NaN.
uint16_t float_to_bf16_bits(float f);

}  // namespace tierzero::reference
