// The per-element and per-block arithmetic of the compact master step (8-bit, bf16 or fp32 moments),
// written once for the host (portable_step.cpp) and for CUDA (gpu_kernel.cu): every operation of
// kernels.cpp's StepVector / UpdateTile / UpdateTile8 / JoinMaster / SplitMaster / DecodeCodes / EncodeCodes, in the
// same order, each rounding once. Host code including this header must be built with -ffp-contract=off (only mul_add
// may fuse); on the device every float operation is an explicit round-to-nearest intrinsic
// (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn, __fmaf_rn), which nvcc never contracts or approximates.
// No standard-library or project header beyond <cstdint> / <cstring> / <cmath>, so nvcc compiles it.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define TZ_HOST_DEVICE __host__ __device__
#else
#define TZ_HOST_DEVICE
#endif

namespace tierzero::cpu_adam::detail {

// Per-step scalars, rounded to float exactly where torch's fused CPU kernel rounds them.
struct StepScalars {
  float grad_multiplier;   // clip_coef / loss_scale
  float l2_decay;          // Adam: weight_decay; AdamW: 0 (g + p*0 == g)
  float param_decay;       // AdamW: 1 - lr*weight_decay; Adam: 1 (p*1 == p)
  float lerp_coeff;        // m = lerp_base + lerp_coeff * (g - m)
  bool lerp_base_is_grad;  // torch's lerp: base m with weight w < 0.5, else base g, weight w-1
  float beta2;
  float one_minus_beta2;
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
};

// The gradient element types the exact step reads.
enum class GradType : uint8_t { kF32, kBF16, kF16 };

// The moment layouts it steps: fp32, bf16 (rounded to nearest even), or 8-bit codes with block scales.
enum class MomentType : uint8_t { kF32, kBF16, kInt8 };

// One stretch of compact master state (host or device pointers): `count` elements from a moment block
// boundary, so block b of the stretch has scales m_scales[b], v_scales[b] (8-bit moments only).
struct CompactState {
  uint16_t* hi;       // bf16 params (ties away), the master's top half
  int16_t* residual;  // the master's residual
  const void* grads;  // GradType elements
  void* m;            // MomentType elements; kInt8: kI8 codes (sign-magnitude bytes)
  void* v;            // MomentType elements; kInt8: kU8 codes
  float* m_scales;    // kInt8: one per kMomentBlock elements; else null
  float* v_scales;
  size_t count;
};

namespace exact {

TZ_HOST_DEVICE inline uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
#endif
}

TZ_HOST_DEVICE inline float float_of(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

// IEEE single-precision operations, each rounded to nearest even once.
TZ_HOST_DEVICE inline float mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

TZ_HOST_DEVICE inline float add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

TZ_HOST_DEVICE inline float sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

TZ_HOST_DEVICE inline float div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

TZ_HOST_DEVICE inline float sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

// Highway's MulAdd(a, b, c): one rounding of a*b + c where the target fuses (kFused: AVX2, AVX-512, NEON,
// SVE), a rounded product then a rounded sum where it does not (SSE4, SSSE3, scalar).
template <bool kFused>
TZ_HOST_DEVICE inline float mul_add(float a, float b, float c) {
  if constexpr (kFused) {
#ifdef __CUDA_ARCH__
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
  } else {
    return add(mul(a, b), c);
  }
}

// The larger of a block maximum so far and a non-negative, non-NaN value (order-independent for such values).
TZ_HOST_DEVICE inline float max_of(float a, float b) { return a < b ? b : a; }

TZ_HOST_DEVICE inline float magnitude(float x) { return float_of(bits_of(x) & 0x7FFFFFFFu); }

TZ_HOST_DEVICE inline bool is_nan(float x) { return (bits_of(x) & 0x7FFFFFFFu) > 0x7F800000u; }

// A gradient element widened to f32 (exact for every finite value, as LoadAsF32 on every target).
template <GradType kGrad>
TZ_HOST_DEVICE inline float load_grad(const void* grads, size_t i) {
  if constexpr (kGrad == GradType::kF32) {
    return static_cast<const float*>(grads)[i];
  } else if constexpr (kGrad == GradType::kBF16) {
    return float_of(static_cast<uint32_t>(static_cast<const uint16_t*>(grads)[i]) << 16);
  } else {
    const uint32_t h = static_cast<const uint16_t*>(grads)[i];
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1Fu, f = h & 0x3FFu;
    if (e == 0) return float_of(bits_of(mul(static_cast<float>(static_cast<int32_t>(f)), 0x1p-24f)) | sign);
    if (e == 31) return float_of(sign | 0x7F800000u | (f << 13));
    return float_of(sign | ((e + 112) << 23) | (f << 13));
  }
}

// The fp32 master from its bf16 hi and int16 residual: mag = ((hi & 0x7fff) << 16) + r (32-bit
// wrap-around, then the top bit cleared), the sign from hi (kernels.cpp JoinMaster).
TZ_HOST_DEVICE inline float join_master(uint16_t hi, int16_t residual) {
  const uint32_t h = static_cast<uint32_t>(hi) << 16;
  const uint32_t sum = (h & 0x7FFF0000u) + static_cast<uint32_t>(static_cast<int32_t>(residual));
  return float_of((sum & 0x7FFFFFFFu) | (h & 0x80000000u));
}

// The fp32 master split into the bf16 hi (to nearest, ties away; NaN: quiet with its sign) and the
// residual, the low 16 bits (0 for NaN) (kernels.cpp SplitMaster).
TZ_HOST_DEVICE inline void split_master(float master, uint16_t& hi, int16_t& residual) {
  const uint32_t bits = bits_of(master);
  const bool nan = is_nan(master);
  hi = static_cast<uint16_t>(((bits + (nan ? 0u : 0x8000u)) >> 16) | (nan ? 0x40u : 0u));
  residual = static_cast<int16_t>(static_cast<uint16_t>(nan ? 0u : bits));
}

// adam.h's 8-bit codes (kernels.cpp MomentCode): E4M3 + sign for m (kSigned), E5M3 for v.
template <bool kSigned>
struct MomentCode {
  static constexpr int kMantissaBits = 3;
  static constexpr int kExponentBits = (kSigned ? 7 : 8) - kMantissaBits;
  static constexpr int32_t kMaxExponent = (1 << kExponentBits) - 1;
  static constexpr uint32_t kRebias = 127 - kMaxExponent;
  static constexpr int32_t kTop = kMaxExponent << kMantissaBits;
  static constexpr int kShift = 23 - kMantissaBits;
  static constexpr float kStep = kSigned ? 0x1p-17f : 0x1p-33f;
  static constexpr float kRounder = kSigned ? 0x1p6f : 0x1p-10f;
};

// A code -> its value times `scale` (kernels.cpp DecodeCodes).
template <bool kSigned>
TZ_HOST_DEVICE inline float decode_moment(uint8_t code, float scale) {
  using Code = MomentCode<kSigned>;
  const uint32_t c = code;
  const uint32_t mag = kSigned ? (c & 0x7Fu) : c;
  float value = mag < (1u << Code::kMantissaBits) ? mul(static_cast<float>(static_cast<int32_t>(mag)), Code::kStep)
                                                  : float_of((mag << Code::kShift) + (Code::kRebias << 23));
  if constexpr (kSigned) value = float_of(bits_of(value) | ((c << 24) & 0x80000000u));
  return mul(value, scale);
}

// How a block's values are encoded against its new absmax (kernels.cpp EncodeWithAbsmax): not positive:
// every code 0 and scale 0; from 2^-126 up: times the rounded reciprocal; below: divided by the absmax.
struct BlockEncoding {
  float scale;          // the block's new scale (its absmax, or 0)
  float absmax_or_inv;  // 1 / absmax, or absmax when `divide`
  bool divide;
  bool zero;
};

TZ_HOST_DEVICE inline BlockEncoding block_encoding(float absmax) {
  if (!(absmax > 0.0f)) return {0.0f, 0.0f, false, true};
  if (absmax >= 0x1p-126f) return {absmax, div(1.0f, absmax), false, false};
  return {absmax, absmax, true, false};
}

// A value -> its code under `e` (kernels.cpp EncodeCodes): q = |x| (m) or max(x, 0) (v) relative to the
// absmax; normal q rounds its mantissa to 3 bits (half up), subnormal q to the nearest step (ties to
// even); clamped to the code of 1.0; m's sign kept on non-zero codes, a positive v at least code 1. A
// NaN q (an inf x of an inf absmax) gives code 0, as on every SIMD target.
template <bool kSigned>
TZ_HOST_DEVICE inline uint8_t encode_moment(float x, const BlockEncoding& e) {
  using Code = MomentCode<kSigned>;
  if (e.zero) return 0;
  const float mag = kSigned ? magnitude(x) : (x > 0.0f ? x : 0.0f);
  const float q = e.divide ? div(mag, e.absmax_or_inv) : mul(mag, e.absmax_or_inv);
  if (is_nan(q)) return 0;
  const uint32_t ubits = bits_of(q);
  const int32_t bits = static_cast<int32_t>(ubits);
  const int32_t normal =
      static_cast<int32_t>(ubits - (Code::kRebias << 23) + (1u << (Code::kShift - 1))) >> Code::kShift;
  const int32_t subnormal = static_cast<int32_t>(bits_of(add(q, Code::kRounder)) - bits_of(Code::kRounder));
  int32_t code = bits < static_cast<int32_t>((Code::kRebias + 1) << 23) ? subnormal : normal;
  code = code < Code::kTop ? code : Code::kTop;
  if constexpr (kSigned) {
    code = code > 0 ? code : 0;
    if (static_cast<int32_t>(bits_of(x)) < 0 && code > 0) code |= 0x80;
  } else {
    const int32_t least = bits > 0 ? 1 : 0;  // a positive v never encodes to 0
    code = code > least ? code : least;
  }
  return static_cast<uint8_t>(static_cast<uint32_t>(code));
}

// One Adam/AdamW step of one element in f32 (kernels.cpp StepVector, torch's fused kernel's order):
// p, m, v updated in place from the widened gradient.
template <bool kFused>
TZ_HOST_DEVICE inline void step_element(const StepScalars& s, float grad, float& p, float& m, float& v) {
  float g = mul(grad, s.grad_multiplier);
  g = mul_add<kFused>(p, s.l2_decay, g);
  p = mul(p, s.param_decay);
  const float lerp_base = s.lerp_base_is_grad ? g : m;
  m = mul_add<kFused>(s.lerp_coeff, sub(g, m), lerp_base);
  v = mul_add<kFused>(mul(s.one_minus_beta2, g), g, mul(v, s.beta2));
  const float denom = add(div(sqrt(v), s.bias_correction2_sqrt), s.eps);
  p = add(p, div(mul(s.neg_step_size, m), denom));
}

// f32 -> bf16 bits rounded to nearest even, NaN a quiet NaN with its sign (common-inl.h F32ToBF16Bits).
TZ_HOST_DEVICE inline uint16_t bf16_nearest_even(float x) {
  const uint32_t bits = bits_of(x);
  if (is_nan(x)) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// Element i of fp32 or bf16 moments (kernels.cpp UpdateTile's LoadAsF32 / Put).
template <MomentType kMoment>
TZ_HOST_DEVICE inline float load_moment(const void* moments, size_t i) {
  static_assert(kMoment != MomentType::kInt8, "8-bit moments are decoded per block");
  if constexpr (kMoment == MomentType::kF32) return static_cast<const float*>(moments)[i];
  return float_of(static_cast<uint32_t>(static_cast<const uint16_t*>(moments)[i]) << 16);
}

template <MomentType kMoment>
TZ_HOST_DEVICE inline void store_moment(void* moments, size_t i, float x) {
  static_assert(kMoment != MomentType::kInt8, "8-bit moments are encoded per block");
  if constexpr (kMoment == MomentType::kF32) {
    static_cast<float*>(moments)[i] = x;
  } else {
    static_cast<uint16_t*>(moments)[i] = bf16_nearest_even(x);
  }
}

// The compact master of element i of `t` rebuilt, stepped with `grad`, `m` and `v`, and split back.
template <bool kFused, GradType kGrad>
TZ_HOST_DEVICE inline void step_master_element(const StepScalars& s, const CompactState& t, size_t i, float& m,
                                               float& v) {
  float p = join_master(t.hi[i], t.residual[i]);
  step_element<kFused>(s, load_grad<kGrad>(t.grads, i), p, m, v);
  split_master(p, t.hi[i], t.residual[i]);
}

// Element i of block b of 8-bit `t`: decodes m and v with the block's old scales, steps, writes the new
// compact master, and returns the new m and v (encoded later with the block's new scales).
template <bool kFused, GradType kGrad>
TZ_HOST_DEVICE inline void step_compact8_element(const StepScalars& s, const CompactState& t, size_t b, size_t i,
                                                 float& m, float& v) {
  m = decode_moment<true>(static_cast<const uint8_t*>(t.m)[i], t.m_scales[b]);
  v = decode_moment<false>(static_cast<const uint8_t*>(t.v)[i], t.v_scales[b]);
  step_master_element<kFused, kGrad>(s, t, i, m, v);
}

// Element i of `t` with fp32 or bf16 moments, all of its state written (kernels.cpp UpdateTile).
template <bool kFused, GradType kGrad, MomentType kMoment>
TZ_HOST_DEVICE inline void step_compact_element(const StepScalars& s, const CompactState& t, size_t i) {
  float m = load_moment<kMoment>(t.m, i);
  float v = load_moment<kMoment>(t.v, i);
  step_master_element<kFused, kGrad>(s, t, i, m, v);
  store_moment<kMoment>(t.m, i, m);
  store_moment<kMoment>(t.v, i, v);
}

}  // namespace exact
}  // namespace tierzero::cpu_adam::detail
