// ISA-free entry points of the Highway kernels (kernels.cpp); each call dispatches at run time to
// the best SIMD target the CPU supports (or the one a test forces). Private to cpu_adam/.
#pragma once

#include <cstddef>

#include "cpu_adam/adam.h"
#include "cpu_adam/internal/step_arithmetic.h"

namespace tierzero::cpu_adam::detail {

// One tile: `count` elements from the start of each buffer. params16 may be null. With a compact
// master, `params` holds the bf16 hi and `residual` the int16 residuals; with 8-bit moments the
// tile starts on a block boundary and the scales are those of its first block on.
struct TileBuffers {
  void* params;
  const void* grads;
  void* exp_avg;
  void* exp_avg_sq;
  void* params16;
  size_t count;
  bool stream;                  // non-temporal fp32 stores; params, exp_avg, exp_avg_sq, params16 are 64-byte aligned
  int16_t* residual = nullptr;  // compact master only
  float* exp_avg_scales = nullptr;     // 8-bit moments only
  float* exp_avg_sq_scales = nullptr;  // 8-bit moments only
};

// Element types of a tile's buffers; params16 is read only when TileBuffers::params16 is set, and
// is never set when params are 16-bit (those are updated in place, rounded to nearest even).
// state kI8: 8-bit moments (m kI8, v kU8). compact_master: params is kBF16 hi plus a residual.
struct TileTypes {
  ElementType params;
  ElementType grads;
  ElementType state;
  ElementType params16;
  bool compact_master = false;
  bool params16_away = false;  // bf16 params16 rounded to nearest, ties away from zero
};

// Updates one tile in place (the contract of CpuAdam::step for `count` elements).
void adam_update_tile(const StepScalars& scalars, const TileTypes& types, const TileBuffers& tile);

// The memory traffic of adam_update_tile on `tile` without Adam's arithmetic: the same loads,
// conversions and stores, with p, m and v each replaced by itself plus the gradient.
void memory_pass_tile(const TileTypes& types, const TileBuffers& tile);

// Returns the sum of squares of `count` gradients of `type`, accumulated in double.
double grad_sq_norm_tile(const void* grads, ElementType type, size_t count);

// dst[i] += float(src[i]) * scale for i < count (`src` of `type`); returns the sum of squares of
// the new dst values, accumulated in double.
double accumulate_scaled_tile(float* dst, const void* src, ElementType type, size_t count, float scale);

// The same into bf16 bits: dst = bf16_rne(float(dst) + float(src) * scale); returns the sum of
// squares of the new (rounded) dst values.
double accumulate_scaled_bf16_tile(uint16_t* dst, const void* src, ElementType type, size_t count, float scale);

// split_master / join_master on `count` elements.
void split_master_n(const float* master, uint16_t* hi, int16_t* residual, size_t count);
void join_master_n(const uint16_t* hi, const int16_t* residual, float* master, size_t count);

// encode_moment_blocks / decode_moment_blocks on `count` values (codes kI8 when `is_signed`, else kU8).
void encode_moment_blocks_n(const float* values, size_t count, void* codes, bool is_signed, float* scales);
void decode_moment_blocks_n(const void* codes, bool is_signed, const float* scales, float* values, size_t count);

// Name of the target the functions above dispatch to now.
const char* dispatched_target_name();

// Whether that target's MulAdd is one fused multiply-add (HWY_NATIVE_FMA: AVX2, AVX-512, NEON, SVE) rather
// than a rounded product and a rounded sum (SSE4, SSSE3, scalar).
bool dispatched_target_fuses();

}  // namespace tierzero::cpu_adam::detail
