// The Adam/AdamW update and the gradient norm, written once with Highway and compiled for every
// target foreach_target.h selects; kernels.h dispatches to the best one at run time.
//
// Built with -ffp-contract=off: the fused multiply-adds are exactly those of torch's compiled fused
// CPU kernel (its lerp's fma, and the two a*b + c the compiler contracted: the L2 term and v), so
// on targets with FMA every result is bit-identical to at::_fused_adam(w)_ (tests/cpu_adam).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu_adam/kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>

#include "common/common-inl.h"
#include "cpu_adam/internal/kernels.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tierzero::cpu_adam::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using detail::StepScalars;
using detail::TileBuffers;
using tierzero::HWY_NAMESPACE::LoadAsF32;
using tierzero::HWY_NAMESPACE::StoreFromF32;

// Template markers of the compact layouts (never the type of a caller's buffer): kCompact params are
// bf16 hi bits (TileBuffers::params) plus int16 residuals (TileBuffers::residual); a kBF16Away params16
// is bf16 rounded to nearest with ties away from zero.
constexpr ElementType kCompact = ElementType::kI16;
constexpr ElementType kBF16Away = ElementType::kU16;

// f32 -> bf16 bits rounded to nearest with ties away from zero on the sign-magnitude bits, as 32-bit
// lanes in [0, 0xffff]; NaN (`is_nan`): a quiet NaN with its sign. Below NaN, the magnitude plus
// 0x8000 never carries into the sign bit, so the rounding adds 0x8000 to the whole bits.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> AwayHiBits(DF df, hn::Vec<DF> v, hn::Mask<DF> is_nan) {
  const hn::RebindToUnsigned<DF> du32;
  const auto bits = hn::BitCast(du32, v);
  const auto nan = hn::RebindMask(du32, is_nan);
  const auto hi = hn::ShiftRight<16>(hn::Add(bits, hn::IfThenZeroElse(nan, hn::Set(du32, 0x8000u))));
  return hn::Or(hi, hn::IfThenElseZero(nan, hn::Set(du32, 0x40u)));
}

// The fp32 master from Lanes(df) bf16 hi bits and int16 residuals:
// mag = ((hi & 0x7fff) << 16) + r (32-bit wrap-around, then the top bit cleared), the sign from hi.
template <class DF>
HWY_INLINE hn::Vec<DF> JoinMaster(DF df, const uint16_t* HWY_RESTRICT hi, const int16_t* HWY_RESTRICT residual) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<int16_t, DF> di16;
  const auto h = hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, hi)));
  const auto r = hn::BitCast(du32, hn::PromoteTo(di32, hn::LoadU(di16, residual)));
  const auto sum = hn::Add(hn::And(h, hn::Set(du32, 0x7FFF0000u)), r);
  return hn::BitCast(df, hn::OrAnd(hn::And(sum, hn::Set(du32, 0x7FFFFFFFu)), h, hn::Set(du32, 0x80000000u)));
}

// The fp32 master split into the bf16 hi (AwayHiBits) and the int16 residual r = mag - (hi_mag << 16):
// r lies in [-32768, 32767] and equals mag modulo 2^16, so it is the low 16 bits of v; 0 for NaN.
template <class DF>
HWY_INLINE void SplitMaster(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT hi, int16_t* HWY_RESTRICT residual) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto is_nan = hn::IsNaN(v);
  hn::StoreU(hn::TruncateTo(du16, AwayHiBits(df, v, is_nan)), du16, hi);
  const auto low_bits = hn::IfThenZeroElse(hn::RebindMask(du32, is_nan), hn::BitCast(du32, v));
  hn::StoreU(hn::TruncateTo(du16, low_bits), du16, reinterpret_cast<uint16_t*>(residual));
}

// The params of a tile as f32 (the compact master rebuilt).
template <ElementType kParam, class DF>
HWY_INLINE hn::Vec<DF> LoadParam(DF df, const TileBuffers& t, size_t i) {
  if constexpr (kParam == kCompact) {
    return JoinMaster(df, static_cast<const uint16_t*>(t.params) + i, t.residual + i);
  } else {
    return LoadAsF32<kParam>(df, t.params, i);
  }
}

// The step's scalars broadcast once per tile.
template <class DF>
struct StepVectors {
  explicit StepVectors(DF df, const StepScalars& s)
      : grad_multiplier(hn::Set(df, s.grad_multiplier)),
        l2_decay(hn::Set(df, s.l2_decay)),
        param_decay(hn::Set(df, s.param_decay)),
        lerp_coeff(hn::Set(df, s.lerp_coeff)),
        beta2(hn::Set(df, s.beta2)),
        one_minus_beta2(hn::Set(df, s.one_minus_beta2)),
        bias_correction2_sqrt(hn::Set(df, s.bias_correction2_sqrt)),
        eps(hn::Set(df, s.eps)),
        neg_step_size(hn::Set(df, s.neg_step_size)) {}
  hn::Vec<DF> grad_multiplier, l2_decay, param_decay, lerp_coeff, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};

// Stores `Lanes(df)` elements of any ElementType from f32; with kStream, fp32 elements go through a
// non-temporal store (base + i aligned to the vector) and 16-bit ones through an ordinary one
// (Highway 1.0.3 streams half-width vectors as full 16-byte stores, past their end).
template <bool kStream, ElementType kType, class DF>
HWY_INLINE void Put(DF df, hn::Vec<DF> v, void* HWY_RESTRICT base, size_t i) {
  if constexpr (kStream && kType == ElementType::kF32) {
    hn::Stream(v, df, static_cast<float*>(base) + i);
  } else if constexpr (kType == kBF16Away) {
    const hn::Rebind<uint16_t, DF> du16;
    hn::StoreU(hn::TruncateTo(du16, AwayHiBits(df, v, hn::IsNaN(v))), du16, static_cast<uint16_t*>(base) + i);
  } else {
    StoreFromF32<kType>(df, v, base, i);
  }
}

// Stores the params of a tile from f32 (the compact master split).
template <bool kStream, ElementType kParam, class DF>
HWY_INLINE void PutParam(DF df, hn::Vec<DF> v, const TileBuffers& t, size_t i) {
  if constexpr (kParam == kCompact) {
    SplitMaster(df, v, static_cast<uint16_t*>(t.params) + i, t.residual + i);
  } else {
    Put<kStream, kParam>(df, v, t.params, i);
  }
}

// Walks `count` elements a vector at a time, then one at a time: make_body(df, std::false_type) for
// df = ScalableTag<float> returns the body called at i = 0, Lanes(df), ... over whole vectors, then
// make_body(d1, std::true_type) for d1 = CappedTag<float, 1> the body of the tail. make_body runs
// once per tag, so the broadcasts it captures stay out of the loops.
template <class MakeBody>
HWY_INLINE void ForEachVector(size_t count, const MakeBody& make_body) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  if (count >= lanes) {
    const auto body = make_body(df, std::false_type{});
    for (; i <= count - lanes; i += lanes) body(i);
  }
  const hn::CappedTag<float, 1> d1;
  const auto body1 = make_body(d1, std::true_type{});
  for (; i < count; ++i) body1(i);
}

// The sum of squares, in double, of the f32 vectors value(i) over `count` elements (value may store
// them too), walked as ForEachVector does with value = make_value(d): each vector's halves promoted
// to double into two accumulators, reduced after the vector loop, then the tail's squares added one
// by one. On HWY_SCALAR (one lane, no halves) every element goes through the tail.
template <class MakeValue>
HWY_INLINE double SumOfSquaresOf(size_t count, const MakeValue& make_value) {
  size_t i = 0;
  double sum = 0.0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> df;
  const hn::Half<decltype(df)> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const size_t lanes = hn::Lanes(df);
  auto sum_lower = hn::Zero(dd);
  auto sum_upper = hn::Zero(dd);
  if (count >= lanes) {
    const auto value = make_value(df);
    for (; i <= count - lanes; i += lanes) {
      const auto v = value(i);
      const auto lower = hn::PromoteTo(dd, hn::LowerHalf(dh, v));
      const auto upper = hn::PromoteTo(dd, hn::UpperHalf(dh, v));
      sum_lower = hn::MulAdd(lower, lower, sum_lower);
      sum_upper = hn::MulAdd(upper, upper, sum_upper);
    }
  }
  sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum_lower, sum_upper)));
#endif
  const hn::CappedTag<float, 1> d1;
  const auto value1 = make_value(d1);
  for (; i < count; ++i) {
    const double x = hn::GetLane(value1(i));
    sum += x * x;
  }
  return sum;
}

// The 8-bit moment codes (adam.h, kMomentBlock): a magnitude code of E exponent bits and 3 mantissa
// bits relative to the block's absmax (exponent field e > 0: 2^(e - (2^E - 1)) * (1 + f/8); e == 0: f
// times the subnormal step), plus a sign bit (bit 7) for the signed m code.
// Measured against E5M2 for m (sign + 5 exponent + 2 mantissa bits, twice the range, half the
// precision): on the quadratic of tests/cpu_adam/moments8_test.cpp, at step 181 of 200, the loss is
// 3.5x the double reference's with E5M2 and 1.4x with E4M3, so m keeps 3 mantissa bits.
template <bool kSigned>
struct MomentCode {
  static constexpr int kMantissaBits = 3;
  static constexpr int kExponentBits = (kSigned ? 7 : 8) - kMantissaBits;
  static constexpr int32_t kMaxExponent = (1 << kExponentBits) - 1;  // the field of 2^0
  static constexpr uint32_t kRebias = 127 - kMaxExponent;            // fp32 exponent field = e + kRebias
  static constexpr int32_t kTop = kMaxExponent << kMantissaBits;     // the code of 1.0
  static constexpr int kShift = 23 - kMantissaBits;                  // fp32 mantissa bits dropped
  // f * 2^(1 - kMaxExponent - kMantissaBits): the subnormal step, and its inverse.
  static_assert(kMantissaBits == 3);
  static constexpr float kStep = kSigned ? 0x1p-17f : 0x1p-33f;
  // A float whose ulp is kStep: q + kRounder rounds q to a multiple of kStep (to nearest even, as a
  // conversion to integer would round q / kStep), for 0 <= q < 2^22 kStep.
  static constexpr float kRounder = kSigned ? 0x1p6f : 0x1p-10f;
};

// Lanes(df) codes at `codes` -> f32 values times `scale`.
template <bool kSigned, class DF>
HWY_INLINE hn::Vec<DF> DecodeCodes(DF df, const uint8_t* HWY_RESTRICT codes, hn::Vec<DF> scale) {
  using Code = MomentCode<kSigned>;
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint8_t, DF> du8;
  const auto c = hn::PromoteTo(du32, hn::LoadU(du8, codes));
  const auto mag = kSigned ? hn::And(c, hn::Set(du32, 0x7Fu)) : c;
  const auto normal = hn::BitCast(df, hn::Add(hn::ShiftLeft<Code::kShift>(mag), hn::Set(du32, Code::kRebias << 23)));
  const auto sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(di32, mag)), hn::Set(df, Code::kStep));
  const auto is_sub = hn::Lt(hn::BitCast(di32, mag), hn::Set(di32, 1 << Code::kMantissaBits));
  auto value = hn::IfThenElse(hn::RebindMask(df, is_sub), sub, normal);
  if constexpr (kSigned) {
    value = hn::BitCast(df, hn::OrAnd(hn::BitCast(du32, value), hn::ShiftLeft<24>(c), hn::Set(du32, 0x80000000u)));
  }
  return hn::Mul(value, scale);
}

// Lanes(df) values -> codes relative to the block's absmax (> 0), rounded to nearest: q = |x| times
// `inv_absmax` (1 / absmax rounded to float; q may exceed 1 by an ulp, clamped below), or, with
// kDivide (an absmax whose reciprocal overflows), |x| / absmax. A q that is NaN (an inf x in a block
// whose absmax is inf) gives code 0.
template <bool kSigned, bool kDivide, class DF>
HWY_INLINE void EncodeCodes(DF df, hn::Vec<DF> x, hn::Vec<DF> absmax_or_inv, uint8_t* HWY_RESTRICT codes) {
  using Code = MomentCode<kSigned>;
  const hn::RebindToSigned<DF> di32;
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint8_t, DF> du8;
  const auto magnitude = kSigned ? hn::Abs(x) : hn::Max(x, hn::Zero(df));
  const auto q = kDivide ? hn::Div(magnitude, absmax_or_inv) : hn::Mul(magnitude, absmax_or_inv);  // ~[0, 1]
  const auto bits = hn::BitCast(di32, q);
  // e > 0: rebias the exponent, round the mantissa to 3 bits (half up), carry into the exponent.
  const auto normal = hn::ShiftRight<Code::kShift>(hn::Add(
      hn::Sub(bits, hn::Set(di32, static_cast<int32_t>(Code::kRebias << 23))), hn::Set(di32, 1 << (Code::kShift - 1))));
  // 0 .. 2^kMantissaBits (the last: the smallest normal code); negative for a NaN q.
  const auto rounder = hn::Set(df, Code::kRounder);
  const auto sub = hn::Sub(hn::BitCast(di32, hn::Add(q, rounder)), hn::BitCast(di32, rounder));
  auto code = hn::IfThenElse(hn::Lt(bits, hn::Set(di32, static_cast<int32_t>((Code::kRebias + 1) << 23))), sub, normal);
  code = hn::Min(code, hn::Set(di32, Code::kTop));
  if constexpr (kSigned) {
    code = hn::Max(code, hn::Zero(di32));
    const auto negative = hn::And(hn::Lt(hn::BitCast(di32, x), hn::Zero(di32)), hn::Gt(code, hn::Zero(di32)));
    code = hn::IfThenElse(negative, hn::Or(code, hn::Set(di32, 0x80)), code);
  } else {
    // A positive v never becomes 0 (m / eps): at least the smallest code.
    code = hn::Max(code, hn::IfThenElseZero(hn::Gt(bits, hn::Zero(di32)), hn::Set(di32, 1)));
  }
  hn::StoreU(hn::TruncateTo(du8, hn::BitCast(du32, code)), du8, codes);  // code in [0, 255]
}

// Decodes `count` (<= kMomentBlock) codes of one block into `values`.
template <bool kSigned>
void DecodeBlock(const uint8_t* HWY_RESTRICT codes, float scale, float* HWY_RESTRICT values, size_t count) {
  ForEachVector(count, [=](auto d, auto) {
    return [d, vscale = hn::Set(d, scale), codes, values](size_t i) {
      hn::StoreU(DecodeCodes<kSigned>(d, codes + i, vscale), d, values + i);
    };
  });
}

// Encodes `count` values against `absmax_or_inv` (EncodeCodes).
template <bool kSigned, bool kDivide>
void EncodeValues(const float* HWY_RESTRICT values, size_t count, float absmax_or_inv, uint8_t* HWY_RESTRICT codes) {
  ForEachVector(count, [=](auto d, auto) {
    return [d, scale = hn::Set(d, absmax_or_inv), values, codes](size_t i) {
      EncodeCodes<kSigned, kDivide>(d, hn::LoadU(d, values + i), scale, codes + i);
    };
  });
}

// Encodes `count` (<= kMomentBlock) values of one block whose largest magnitude is `absmax`; returns
// the block's scale (absmax; 0 with all codes 0 when absmax is not positive).
template <bool kSigned>
float EncodeWithAbsmax(const float* HWY_RESTRICT values, size_t count, float absmax, uint8_t* HWY_RESTRICT codes) {
  if (!(absmax > 0.0f)) {
    std::fill(codes, codes + count, uint8_t{0});
    return 0.0f;
  }
  if (absmax >= 0x1p-126f) {
    EncodeValues<kSigned, false>(values, count, 1.0f / absmax, codes);
  } else {
    EncodeValues<kSigned, true>(values, count, absmax, codes);
  }
  return absmax;
}

// The largest magnitude of a block's values from the vector maxima of its first whole vectors
// (`vector_max`: Max over Abs(x) for m, x for v) and its scalar tail values[tail_begin, count).
template <bool kSigned, class DF>
HWY_INLINE float BlockAbsmax(DF df, hn::Vec<DF> vector_max, const float* HWY_RESTRICT values, size_t tail_begin,
                             size_t count) {
  float absmax = hn::GetLane(hn::MaxOfLanes(df, vector_max));
  for (size_t j = tail_begin; j < count; ++j) absmax = std::max(absmax, kSigned ? std::fabs(values[j]) : values[j]);
  return absmax;
}

// Encodes `count` (<= kMomentBlock) values of one block; returns the scale (the absmax).
template <bool kSigned>
float EncodeBlock(const float* HWY_RESTRICT values, size_t count, uint8_t* HWY_RESTRICT codes) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  auto vmax = hn::Zero(df);
  if (count >= lanes) {
    for (; i <= count - lanes; i += lanes) {
      const auto x = hn::LoadU(df, values + i);
      vmax = hn::Max(vmax, kSigned ? hn::Abs(x) : x);
    }
  }
  return EncodeWithAbsmax<kSigned>(values, count, BlockAbsmax<kSigned>(df, vmax, values, i, count), codes);
}

// Steps Lanes(df) elements at offset i of the tile whose moments m and v are given (as f32) and
// returned updated: loads the params and gradient, stores the new params and 16-bit copy. Every
// operation mirrors at::_fused_adam(w)_ on fp32 (for 16-bit params: on the param widened to fp32,
// rounded back to nearest even, as torch's bf16 path). Adam: g += p * weight_decay (l2_decay 0 for
// AdamW); AdamW: p *= 1 - lr * wd (1 for Adam). kShapeOnly: p, m, v each plus g instead of Adam's
// arithmetic (CpuAdam::memory_pass).
template <ElementType kParam, ElementType kGrad, ElementType kOut, bool kWriteOut, bool kLerpFromGrad, bool kStream,
          bool kShapeOnly, class DF>
HWY_INLINE void StepVector(DF df, const StepVectors<DF>& c, const TileBuffers& t, size_t i, hn::Vec<DF>& m,
                           hn::Vec<DF>& v) {
  auto p = LoadParam<kParam>(df, t, i);
  const auto grad = LoadAsF32<kGrad>(df, t.grads, i);
  if constexpr (kShapeOnly) {
    p = hn::Add(p, grad);
    m = hn::Add(m, grad);
    v = hn::Add(v, grad);
  } else {
    auto g = hn::Mul(grad, c.grad_multiplier);
    g = hn::MulAdd(p, c.l2_decay, g);
    p = hn::Mul(p, c.param_decay);

    const auto lerp_base = kLerpFromGrad ? g : m;
    m = hn::MulAdd(c.lerp_coeff, hn::Sub(g, m), lerp_base);
    v = hn::MulAdd(hn::Mul(c.one_minus_beta2, g), g, hn::Mul(v, c.beta2));

    const auto denom = hn::Add(hn::Div(hn::Sqrt(v), c.bias_correction2_sqrt), c.eps);
    p = hn::Add(p, hn::Div(hn::Mul(c.neg_step_size, m), denom));
  }
  PutParam<kStream, kParam>(df, p, t, i);
  if constexpr (kWriteOut) Put<kStream, kOut>(df, p, t.params16, i);
}

// fp32 or bf16 moments: loads m and v, steps, stores them. kStream: the vector loop streams its fp32
// stores (every written pointer vector-aligned); the scalar tail stores normally, and the tile ends
// with a fence so the next reader sees the data.
template <ElementType kParam, ElementType kGrad, ElementType kState, ElementType kOut, bool kWriteOut,
          bool kLerpFromGrad, bool kStream, bool kShapeOnly>
void UpdateTile(const StepScalars& s, const TileBuffers& t) {
  ForEachVector(t.count, [&]<class D, bool kTail>(D d, std::bool_constant<kTail>) {
    return [d, c = StepVectors<D>(d, s), &t](size_t i) {
      auto m = LoadAsF32<kState>(d, t.exp_avg, i);
      auto v = LoadAsF32<kState>(d, t.exp_avg_sq, i);
      StepVector<kParam, kGrad, kOut, kWriteOut, kLerpFromGrad, kStream && !kTail, kShapeOnly>(d, c, t, i, m, v);
      Put<kStream && !kTail, kState>(d, m, t.exp_avg, i);
      Put<kStream && !kTail, kState>(d, v, t.exp_avg_sq, i);
    };
  });
  if constexpr (kStream) hwy::FlushStream();
}

// 8-bit moments, one block at a time in one pass: each vector's m and v codes are decoded, stepped,
// and kept as f32 in the block's scratch (in L1) while the running maxima of |m| and v grow; then the
// block is encoded with its new absmax. The tile starts on a block boundary. The vectors, the scalar
// tail and the order of every maximum are those of DecodeBlock, UpdateTile and EncodeBlock.
template <ElementType kParam, ElementType kGrad, ElementType kOut, bool kWriteOut, bool kLerpFromGrad, bool kShapeOnly>
void UpdateTile8(const StepScalars& s, const TileBuffers& t) {
  using DF = hn::ScalableTag<float>;
  using D1 = hn::CappedTag<float, 1>;
  const DF df;
  const D1 d1;
  const size_t lanes = hn::Lanes(df);
  const StepVectors<DF> c(df, s);
  const StepVectors<D1> c1(d1, s);
  auto* m_codes = static_cast<uint8_t*>(t.exp_avg);
  auto* v_codes = static_cast<uint8_t*>(t.exp_avg_sq);
  HWY_ALIGN float m_new[kMomentBlock];
  HWY_ALIGN float v_new[kMomentBlock];
  // The new m and v of the elements at tile offset begin + j, decoded with the block's scales.
  const auto step = [&](auto d, const auto& cd, size_t begin, size_t j, float m_scale, float v_scale) {
    auto m = DecodeCodes<true>(d, m_codes + begin + j, hn::Set(d, m_scale));
    auto v = DecodeCodes<false>(d, v_codes + begin + j, hn::Set(d, v_scale));
    StepVector<kParam, kGrad, kOut, kWriteOut, kLerpFromGrad, false, kShapeOnly>(d, cd, t, begin + j, m, v);
    hn::StoreU(m, d, m_new + j);
    hn::StoreU(v, d, v_new + j);
    return std::make_pair(m, v);
  };
  for (size_t begin = 0, b = 0; begin < t.count; begin += kMomentBlock, ++b) {
    const size_t n = std::min(kMomentBlock, t.count - begin);
    const float m_scale = t.exp_avg_scales[b];
    const float v_scale = t.exp_avg_sq_scales[b];
    auto m_max = hn::Zero(df);
    auto v_max = hn::Zero(df);
    size_t j = 0;
    if (n >= lanes) {
      for (; j <= n - lanes; j += lanes) {
        const auto [m, v] = step(df, c, begin, j, m_scale, v_scale);
        m_max = hn::Max(m_max, hn::Abs(m));
        v_max = hn::Max(v_max, v);
      }
    }
    for (size_t k = j; k < n; ++k) step(d1, c1, begin, k, m_scale, v_scale);
    t.exp_avg_scales[b] = EncodeWithAbsmax<true>(m_new, n, BlockAbsmax<true>(df, m_max, m_new, j, n), m_codes + begin);
    t.exp_avg_sq_scales[b] =
        EncodeWithAbsmax<false>(v_new, n, BlockAbsmax<false>(df, v_max, v_new, j, n), v_codes + begin);
  }
}

// The shape-only pass has no lerp to choose; 8-bit moments never stream (CpuAdam::step).
template <ElementType kParam, ElementType kGrad, ElementType kState, ElementType kOut, bool kWriteOut, bool kShapeOnly>
void UpdateTileLerp(const StepScalars& s, const TileBuffers& t) {
  const bool lerp_from_grad = !kShapeOnly && s.lerp_base_is_grad;
  if constexpr (kState == ElementType::kI8) {
    if (lerp_from_grad) return UpdateTile8<kParam, kGrad, kOut, kWriteOut, true, false>(s, t);
    UpdateTile8<kParam, kGrad, kOut, kWriteOut, false, kShapeOnly>(s, t);
  } else if (!lerp_from_grad) {
    if (t.stream) return UpdateTile<kParam, kGrad, kState, kOut, kWriteOut, false, true, kShapeOnly>(s, t);
    UpdateTile<kParam, kGrad, kState, kOut, kWriteOut, false, false, kShapeOnly>(s, t);
  } else {
    if (t.stream) return UpdateTile<kParam, kGrad, kState, kOut, kWriteOut, true, true, false>(s, t);
    UpdateTile<kParam, kGrad, kState, kOut, kWriteOut, true, false, false>(s, t);
  }
}

// 16-bit params are their own 16-bit copy: only fp32 params may write one.
template <ElementType kParam, ElementType kGrad, ElementType kState, bool kShapeOnly>
void UpdateTileOut(const StepScalars& s, const detail::TileTypes& types, const TileBuffers& t) {
  if constexpr (kParam != ElementType::kF32) {
    UpdateTileLerp<kParam, kGrad, kState, ElementType::kF32, false, kShapeOnly>(s, t);
  } else if (t.params16 == nullptr) {
    UpdateTileLerp<kParam, kGrad, kState, ElementType::kF32, false, kShapeOnly>(s, t);
  } else if (types.params16 == ElementType::kBF16 && types.params16_away) {
    UpdateTileLerp<kParam, kGrad, kState, kBF16Away, true, kShapeOnly>(s, t);
  } else if (types.params16 == ElementType::kBF16) {
    UpdateTileLerp<kParam, kGrad, kState, ElementType::kBF16, true, kShapeOnly>(s, t);
  } else {
    UpdateTileLerp<kParam, kGrad, kState, ElementType::kF16, true, kShapeOnly>(s, t);
  }
}

// types.state kI8: 8-bit moments (m kI8, v kU8).
template <ElementType kParam, ElementType kGrad, bool kShapeOnly>
void UpdateTileState(const StepScalars& s, const detail::TileTypes& types, const TileBuffers& t) {
  if (types.state == ElementType::kF32) {
    UpdateTileOut<kParam, kGrad, ElementType::kF32, kShapeOnly>(s, types, t);
  } else if (types.state == ElementType::kBF16) {
    UpdateTileOut<kParam, kGrad, ElementType::kBF16, kShapeOnly>(s, types, t);
  } else {
    UpdateTileOut<kParam, kGrad, ElementType::kI8, kShapeOnly>(s, types, t);
  }
}

template <ElementType kParam, bool kShapeOnly>
void UpdateTileGrads(const StepScalars& s, const detail::TileTypes& types, const TileBuffers& t) {
  switch (types.grads) {
    case ElementType::kF32: return UpdateTileState<kParam, ElementType::kF32, kShapeOnly>(s, types, t);
    case ElementType::kBF16: return UpdateTileState<kParam, ElementType::kBF16, kShapeOnly>(s, types, t);
    case ElementType::kF16: return UpdateTileState<kParam, ElementType::kF16, kShapeOnly>(s, types, t);
    default: return;  // no other type passes CpuAdam's checks
  }
}

template <bool kShapeOnly>
void UpdateTileParams(const StepScalars& s, const detail::TileTypes& types, const TileBuffers& t) {
  if (types.compact_master) return UpdateTileGrads<kCompact, kShapeOnly>(s, types, t);
  switch (types.params) {
    case ElementType::kF32: return UpdateTileGrads<ElementType::kF32, kShapeOnly>(s, types, t);
    case ElementType::kBF16: return UpdateTileGrads<ElementType::kBF16, kShapeOnly>(s, types, t);
    case ElementType::kF16: return UpdateTileGrads<ElementType::kF16, kShapeOnly>(s, types, t);
    default: return;  // no other type passes CpuAdam's checks
  }
}

void AdamUpdateTile(const StepScalars& s, const detail::TileTypes& types, const TileBuffers& t) {
  UpdateTileParams<false>(s, types, t);
}

void MemoryPassTile(const detail::TileTypes& types, const TileBuffers& t) {
  UpdateTileParams<true>(StepScalars{}, types, t);
}

template <ElementType kType>
double SumOfSquares(const void* grads, size_t count) {
  return SumOfSquaresOf(count, [=](auto d) { return [=](size_t i) { return LoadAsF32<kType>(d, grads, i); }; });
}

// Returns f(std::integral_constant<ElementType, kType>{}) for kType = `type`, a kernel type (fp32,
// bf16 or fp16); 0.0 for any other type (no elements).
template <class F>
HWY_INLINE double WithKernelType(ElementType type, const F& f) {
  switch (type) {
    case ElementType::kF32: return f(std::integral_constant<ElementType, ElementType::kF32>{});
    case ElementType::kBF16: return f(std::integral_constant<ElementType, ElementType::kBF16>{});
    case ElementType::kF16: return f(std::integral_constant<ElementType, ElementType::kF16>{});
    default: return 0.0;
  }
}

double GradSqNormTile(const void* grads, ElementType type, size_t count) {
  return WithKernelType(type, [&](auto k) { return SumOfSquares<decltype(k)::value>(grads, count); });
}

// dst += float(src) * scale (the product rounded to float, then the sum), returning the sum of
// squares of the new dst values in double, promoted as SumOfSquares does.
template <ElementType kType>
double AccumulateScaled(float* HWY_RESTRICT dst, const void* HWY_RESTRICT src, size_t count, float scale) {
  return SumOfSquaresOf(count, [=](auto d) {
    return [d, vscale = hn::Set(d, scale), dst, src](size_t i) {
      const auto v = hn::Add(hn::LoadU(d, dst + i), hn::Mul(LoadAsF32<kType>(d, src, i), vscale));
      hn::StoreU(v, d, dst + i);
      return v;
    };
  });
}

double AccumulateScaledTile(float* dst, const void* src, ElementType type, size_t count, float scale) {
  return WithKernelType(type, [&](auto k) { return AccumulateScaled<decltype(k)::value>(dst, src, count, scale); });
}

// dst = bf16(float(dst) + float(src) * scale), returning the sum of squares of the new dst.
template <ElementType kType>
double AccumulateScaledBF16(uint16_t* HWY_RESTRICT dst, const void* HWY_RESTRICT src, size_t count, float scale) {
  return SumOfSquaresOf(count, [=](auto d) {
    return [d, vscale = hn::Set(d, scale), dst, src](size_t i) {
      const auto sum = hn::Add(LoadAsF32<ElementType::kBF16>(d, dst, i), hn::Mul(LoadAsF32<kType>(d, src, i), vscale));
      StoreFromF32<ElementType::kBF16>(d, sum, dst, i);
      return LoadAsF32<ElementType::kBF16>(d, dst, i);
    };
  });
}

double AccumulateScaledBF16Tile(uint16_t* dst, const void* src, ElementType type, size_t count, float scale) {
  return WithKernelType(type, [&](auto k) { return AccumulateScaledBF16<decltype(k)::value>(dst, src, count, scale); });
}

void SplitMasterN(const float* HWY_RESTRICT master, uint16_t* HWY_RESTRICT hi, int16_t* HWY_RESTRICT residual,
                  size_t count) {
  ForEachVector(count, [=](auto d, auto) {
    return [=](size_t i) { SplitMaster(d, hn::LoadU(d, master + i), hi + i, residual + i); };
  });
}

void JoinMasterN(const uint16_t* HWY_RESTRICT hi, const int16_t* HWY_RESTRICT residual, float* HWY_RESTRICT master,
                 size_t count) {
  ForEachVector(count, [=](auto d, auto) {
    return [=](size_t i) { hn::StoreU(JoinMaster(d, hi + i, residual + i), d, master + i); };
  });
}

void EncodeMomentBlocksN(const float* values, size_t count, void* codes, bool is_signed, float* scales) {
  auto* c = static_cast<uint8_t*>(codes);
  for (size_t begin = 0, b = 0; begin < count; begin += kMomentBlock, ++b) {
    const size_t n = std::min(kMomentBlock, count - begin);
    scales[b] =
        is_signed ? EncodeBlock<true>(values + begin, n, c + begin) : EncodeBlock<false>(values + begin, n, c + begin);
  }
}

void DecodeMomentBlocksN(const void* codes, bool is_signed, const float* scales, float* values, size_t count) {
  const auto* c = static_cast<const uint8_t*>(codes);
  for (size_t begin = 0, b = 0; begin < count; begin += kMomentBlock, ++b) {
    const size_t n = std::min(kMomentBlock, count - begin);
    if (is_signed) {
      DecodeBlock<true>(c + begin, scales[b], values + begin, n);
    } else {
      DecodeBlock<false>(c + begin, scales[b], values + begin, n);
    }
  }
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

bool TargetFuses() { return HWY_NATIVE_FMA != 0; }

}  // namespace tierzero::cpu_adam::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tierzero::cpu_adam::detail {

HWY_EXPORT(AdamUpdateTile);
HWY_EXPORT(MemoryPassTile);
HWY_EXPORT(GradSqNormTile);
HWY_EXPORT(AccumulateScaledTile);
HWY_EXPORT(TargetName);
HWY_EXPORT(TargetFuses);
HWY_EXPORT(AccumulateScaledBF16Tile);
HWY_EXPORT(SplitMasterN);
HWY_EXPORT(JoinMasterN);
HWY_EXPORT(EncodeMomentBlocksN);
HWY_EXPORT(DecodeMomentBlocksN);

double accumulate_scaled_bf16_tile(uint16_t* dst, const void* src, ElementType type, size_t count, float scale) {
  return HWY_DYNAMIC_DISPATCH(AccumulateScaledBF16Tile)(dst, src, type, count, scale);
}

void split_master_n(const float* master, uint16_t* hi, int16_t* residual, size_t count) {
  HWY_DYNAMIC_DISPATCH(SplitMasterN)(master, hi, residual, count);
}

void join_master_n(const uint16_t* hi, const int16_t* residual, float* master, size_t count) {
  HWY_DYNAMIC_DISPATCH(JoinMasterN)(hi, residual, master, count);
}

void encode_moment_blocks_n(const float* values, size_t count, void* codes, bool is_signed, float* scales) {
  HWY_DYNAMIC_DISPATCH(EncodeMomentBlocksN)(values, count, codes, is_signed, scales);
}

void decode_moment_blocks_n(const void* codes, bool is_signed, const float* scales, float* values, size_t count) {
  HWY_DYNAMIC_DISPATCH(DecodeMomentBlocksN)(codes, is_signed, scales, values, count);
}

void adam_update_tile(const StepScalars& scalars, const TileTypes& types, const TileBuffers& tile) {
  HWY_DYNAMIC_DISPATCH(AdamUpdateTile)(scalars, types, tile);
}

void memory_pass_tile(const TileTypes& types, const TileBuffers& tile) {
  HWY_DYNAMIC_DISPATCH(MemoryPassTile)(types, tile);
}

double grad_sq_norm_tile(const void* grads, ElementType type, size_t count) {
  return HWY_DYNAMIC_DISPATCH(GradSqNormTile)(grads, type, count);
}

double accumulate_scaled_tile(float* dst, const void* src, ElementType type, size_t count, float scale) {
  return HWY_DYNAMIC_DISPATCH(AccumulateScaledTile)(dst, src, type, count, scale);
}

const char* dispatched_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

bool dispatched_target_fuses() { return HWY_DYNAMIC_DISPATCH(TargetFuses)(); }

}  // namespace tierzero::cpu_adam::detail
#endif  // HWY_ONCE
