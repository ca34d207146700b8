// Per-target conversions between f32 vectors and 16-bit floats held as uint16_t bits, correct on
// every Highway target: round to nearest even, NaN kept a quiet NaN with its sign, overflow to inf,
// fp16 subnormals exact -- what PyTorch's .to(dtype) gives. The one implementation: cpu_adam's
// kernels load and store through it, and common/internal/float_convert.h's bulk conversions (checkpoint,
// offload, engine) are built from it.
//
// Highway 1.0.3 (Debian 12) truncates in DemoteTo(bf16), and its software fp16 conversions (targets
// without F16C: SSSE3, SSE4, EMU128) neither round nor map inf/NaN. So bf16 always, and fp16 on
// those targets, are converted here with integer ops; x86 targets with F16C (AVX2, AVX-512) use the
// hardware instructions (vcvtps2ph with round-to-nearest-even).
//
// Include inside a Highway per-target TU (after foreach_target.h), like any -inl.h header; the
// functions are in namespace tierzero::HWY_NAMESPACE.
#if defined(TIERZERO_COMMON_FLOAT_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TIERZERO_COMMON_FLOAT_CONVERT_INL_H_
#undef TIERZERO_COMMON_FLOAT_CONVERT_INL_H_
#else
#define TIERZERO_COMMON_FLOAT_CONVERT_INL_H_
#endif

#include <cstdint>

#include "common/internal/element_type.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tierzero::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#undef TIERZERO_NATIVE_F16
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define TIERZERO_NATIVE_F16 1
#else
#define TIERZERO_NATIVE_F16 0
#endif

// bf16 bits -> f32 (exact: the bits are the upper half of the f32).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadBF16(DF df, const uint16_t* HWY_RESTRICT p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}

// f32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN, overflow rounds to inf.
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> F32ToBF16Bits(DF df, hn::Vec<DF> v) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto bits = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du32, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(bits, hn::Add(hn::Set(du32, 0x7FFF), lsb)));
  const auto quiet_nan = hn::Or(hn::ShiftRight<16>(bits), hn::Set(du32, 0x40));
  const auto is_nan = hn::RebindMask(du32, hn::Not(hn::Eq(v, v)));  // Ne(v, v) is ordered on x86
  return hn::DemoteTo(du16, hn::BitCast(di32, hn::IfThenElse(is_nan, quiet_nan, rounded)));
}

// fp16 bits -> f32 (exact, including subnormals, inf and NaN).
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16(DF df, const uint16_t* HWY_RESTRICT p) {
#if TIERZERO_NATIVE_F16
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::PromoteTo(df, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
#else
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto h = hn::PromoteTo(du32, hn::LoadU(du16, p));
  const auto shifted_exp = hn::Set(du32, 0x7C00u << 13);
  const auto magnitude = hn::ShiftLeft<13>(hn::And(h, hn::Set(du32, 0x7FFF)));
  const auto exp = hn::And(magnitude, shifted_exp);
  const auto rebiased = hn::Add(magnitude, hn::Set(du32, (127u - 15u) << 23));
  const auto inf_nan = hn::Add(rebiased, hn::Set(du32, (128u - 16u) << 23));
  // Zero and subnormals: place the mantissa in a float of exponent 2^-14 and subtract 2^-14.
  const auto magic = hn::Set(du32, 113u << 23);
  const auto subnormal =
      hn::BitCast(du32, hn::Sub(hn::BitCast(df, hn::Add(rebiased, hn::Set(du32, 1u << 23))), hn::BitCast(df, magic)));
  auto bits = hn::IfThenElse(hn::Eq(exp, shifted_exp), inf_nan, rebiased);
  bits = hn::IfThenElse(hn::Eq(exp, hn::Zero(du32)), subnormal, bits);
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du32, 0x8000)));
  return hn::BitCast(df, hn::Or(bits, sign));
#endif
}

// f32 -> fp16 bits, round to nearest even; overflow gives inf, NaN stays a quiet NaN.
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> F32ToF16Bits(DF df, hn::Vec<DF> v) {
  const hn::Rebind<uint16_t, DF> du16;
#if TIERZERO_NATIVE_F16
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::BitCast(du16, hn::DemoteTo(df16, v));
#else
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const auto bits = hn::BitCast(du32, v);
  const auto sign = hn::And(bits, hn::Set(du32, 0x80000000u));
  const auto magnitude = hn::Xor(bits, sign);
  const auto magnitude_i = hn::BitCast(di32, magnitude);
  // >= 65520 rounds to inf; NaN becomes 0x7E00.
  const auto is_nan = hn::Gt(magnitude_i, hn::Set(di32, 0x7F800000));
  const auto overflow = hn::IfThenElse(hn::RebindMask(du32, is_nan), hn::Set(du32, 0x7E00), hn::Set(du32, 0x7C00));
  // Below 2^-14: adding 0.5 lets the FPU round the mantissa to nearest even in the low bits.
  const auto half = hn::Set(du32, 126u << 23);
  const auto subnormal = hn::Sub(hn::BitCast(du32, hn::Add(hn::BitCast(df, magnitude), hn::BitCast(df, half))), half);
  // Normal: rebias the exponent, add 0xFFF plus the lowest kept mantissa bit, drop 13 bits.
  const auto mant_odd = hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du32, 1));
  const auto rebias = hn::Set(du32, static_cast<uint32_t>((15 - 127) * (1 << 23) + 0xFFF));
  const auto normal = hn::ShiftRight<13>(hn::Add(hn::Add(magnitude, rebias), mant_odd));
  auto result = hn::IfThenElse(hn::RebindMask(du32, hn::Lt(magnitude_i, hn::Set(di32, 0x38800000))), subnormal, normal);
  result = hn::IfThenElse(hn::RebindMask(du32, hn::Gt(magnitude_i, hn::Set(di32, 0x477FFFFF))), overflow, result);
  result = hn::Or(result, hn::ShiftRight<16>(sign));
  return hn::DemoteTo(du16, hn::BitCast(di32, result));
#endif
}

// Loads `Lanes(df)` elements of a 16-bit float type as f32.
template <ElementType kType, class DF>
HWY_INLINE hn::Vec<DF> Load16(DF df, const uint16_t* HWY_RESTRICT p) {
  static_assert(kType == ElementType::kBF16 || kType == ElementType::kF16);
  if constexpr (kType == ElementType::kBF16) {
    return LoadBF16(df, p);
  } else {
    return LoadF16(df, p);
  }
}

// Rounds `v` to a 16-bit float type and stores `Lanes(df)` elements.
template <ElementType kType, class DF>
HWY_INLINE void Store16(DF df, hn::Vec<DF> v, uint16_t* HWY_RESTRICT p) {
  static_assert(kType == ElementType::kBF16 || kType == ElementType::kF16);
  const hn::Rebind<uint16_t, DF> du16;
  if constexpr (kType == ElementType::kBF16) {
    hn::StoreU(F32ToBF16Bits(df, v), du16, p);
  } else {
    hn::StoreU(F32ToF16Bits(df, v), du16, p);
  }
}

// Loads `Lanes(df)` elements of kF32, kBF16 or kF16 as f32.
template <ElementType kType, class DF>
HWY_INLINE hn::Vec<DF> LoadAsF32(DF df, const void* HWY_RESTRICT base, size_t i) {
  if constexpr (kType == ElementType::kF32) {
    return hn::LoadU(df, static_cast<const float*>(base) + i);
  } else {
    return Load16<kType>(df, static_cast<const uint16_t*>(base) + i);
  }
}

// Stores `Lanes(df)` elements of kF32, kBF16 or kF16 from f32 (rounded to nearest even for 16-bit).
template <ElementType kType, class DF>
HWY_INLINE void StoreFromF32(DF df, hn::Vec<DF> v, void* HWY_RESTRICT base, size_t i) {
  if constexpr (kType == ElementType::kF32) {
    hn::StoreU(v, df, static_cast<float*>(base) + i);
  } else {
    Store16<kType>(df, v, static_cast<uint16_t*>(base) + i);
  }
}

}  // namespace tierzero::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TIERZERO_COMMON_FLOAT_CONVERT_INL_H_
