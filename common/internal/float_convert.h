// Bulk fp32 <-> bf16 / fp16 conversion, as PyTorch's .to(dtype) does it: round to nearest, ties to
// even; NaN stays a quiet NaN with its sign; values beyond the 16-bit range become infinity; fp16
// subnormals exact. Written once with Highway (common/common-inl.h, the per-target form that
// SIMD kernels such as cpu_adam's use directly) and dispatched at run time to the machine's best
// target. 16-bit values are raw bits in native byte order, at any alignment; `in` and `out` must not
// overlap.
#pragma once

#include <span>

namespace tierzero {

// Rounds each of `in` to bfloat16 and writes in.size() values (2 bytes each) at `out`.
void floats_to_bf16(std::span<const float> in, void* out);
// Rounds each of `in` to IEEE binary16 and writes in.size() values (2 bytes each) at `out`.
void floats_to_fp16(std::span<const float> in, void* out);
// Widens out.size() bfloat16 values at `in` to floats (exact).
void bf16_to_floats(const void* in, std::span<float> out);
// Widens out.size() IEEE binary16 values at `in` to floats (exact).
void fp16_to_floats(const void* in, std::span<float> out);

}  // namespace tierzero
