// The Adam/AdamW update and the gradient norm, written once with Highway and compiled for every
// target foreach_target.h selects; kernels.h dispatches to the best one at run time.
//
// Built with -ffp-contract=off: the fused multiply-adds are exactly those of torch's compiled fused
// CPU kernel (its lerp's fma, and the two a*b + c the compiler contracted: the L2 term and v), so
// on targets with FMA every result is bit-identical to at::_fused_adam(w)_ (tests/cpu_adam).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu_adam/kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

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
  } else {
    StoreFromF32<kType>(df, v, base, i);
  }
}

// Updates Lanes(df) elements at offset i; every operation mirrors at::_fused_adam(w)_ on fp32 (for
// 16-bit params: on the param widened to fp32, rounded back to nearest even, as torch's bf16 path).
// Adam: g += p * weight_decay (l2_decay 0 for AdamW); AdamW: p *= 1 - lr * wd (1 for Adam).
// kShapeOnly: the same loads, conversions and stores with p, m, v each plus g instead of Adam's
// arithmetic (CpuAdam::memory_pass).
template <ElementType kParam, ElementType kGrad, ElementType kState, ElementType kOut, bool kWriteOut,
          bool kLerpFromGrad, bool kStream, bool kShapeOnly, class DF>
HWY_INLINE void UpdateVector(DF df, const StepVectors<DF>& c, const TileBuffers& t, size_t i) {
  auto p = LoadAsF32<kParam>(df, t.params, i);
  if constexpr (kShapeOnly) {
    const auto g = LoadAsF32<kGrad>(df, t.grads, i);
    p = hn::Add(p, g);
    Put<kStream, kParam>(df, p, t.params, i);
    Put<kStream, kState>(df, hn::Add(LoadAsF32<kState>(df, t.exp_avg, i), g), t.exp_avg, i);
    Put<kStream, kState>(df, hn::Add(LoadAsF32<kState>(df, t.exp_avg_sq, i), g), t.exp_avg_sq, i);
    if constexpr (kWriteOut) Put<kStream, kOut>(df, p, t.params16, i);
    return;
  }
  auto g = hn::Mul(LoadAsF32<kGrad>(df, t.grads, i), c.grad_multiplier);
  g = hn::MulAdd(p, c.l2_decay, g);
  p = hn::Mul(p, c.param_decay);

  auto m = LoadAsF32<kState>(df, t.exp_avg, i);
  const auto lerp_base = kLerpFromGrad ? g : m;
  m = hn::MulAdd(c.lerp_coeff, hn::Sub(g, m), lerp_base);
  auto v = LoadAsF32<kState>(df, t.exp_avg_sq, i);
  v = hn::MulAdd(hn::Mul(c.one_minus_beta2, g), g, hn::Mul(v, c.beta2));

  const auto denom = hn::Add(hn::Div(hn::Sqrt(v), c.bias_correction2_sqrt), c.eps);
  p = hn::Add(p, hn::Div(hn::Mul(c.neg_step_size, m), denom));

  Put<kStream, kParam>(df, p, t.params, i);
  Put<kStream, kState>(df, m, t.exp_avg, i);
  Put<kStream, kState>(df, v, t.exp_avg_sq, i);
  if constexpr (kWriteOut) Put<kStream, kOut>(df, p, t.params16, i);
}

// kStream: the vector loop streams its fp32 stores (every written pointer vector-aligned); the
// scalar tail stores normally, and the tile ends with a fence so the next reader sees the data.
template <ElementType kParam, ElementType kGrad, ElementType kState, ElementType kOut, bool kWriteOut,
          bool kLerpFromGrad, bool kStream, bool kShapeOnly>
void UpdateTile(const StepScalars& s, const TileBuffers& t) {
  hn::ScalableTag<float> df;
  const StepVectors<decltype(df)> c(df, s);
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  if (t.count >= lanes) {
    for (; i <= t.count - lanes; i += lanes) {
      UpdateVector<kParam, kGrad, kState, kOut, kWriteOut, kLerpFromGrad, kStream, kShapeOnly>(df, c, t, i);
    }
  }
  hn::CappedTag<float, 1> d1;
  const StepVectors<decltype(d1)> c1(d1, s);
  for (; i < t.count; ++i) {
    UpdateVector<kParam, kGrad, kState, kOut, kWriteOut, kLerpFromGrad, false, kShapeOnly>(d1, c1, t, i);
  }
  if constexpr (kStream) hwy::FlushStream();
}

// The shape-only pass has no lerp to choose.
template <ElementType kParam, ElementType kGrad, ElementType kState, ElementType kOut, bool kWriteOut, bool kShapeOnly>
void UpdateTileLerp(const StepScalars& s, const TileBuffers& t) {
  if (kShapeOnly || !s.lerp_base_is_grad) {
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
  } else if (types.params16 == ElementType::kBF16) {
    UpdateTileLerp<kParam, kGrad, kState, ElementType::kBF16, true, kShapeOnly>(s, t);
  } else {
    UpdateTileLerp<kParam, kGrad, kState, ElementType::kF16, true, kShapeOnly>(s, t);
  }
}

template <ElementType kParam, ElementType kGrad, bool kShapeOnly>
void UpdateTileState(const StepScalars& s, const detail::TileTypes& types, const TileBuffers& t) {
  if (types.state == ElementType::kF32) {
    UpdateTileOut<kParam, kGrad, ElementType::kF32, kShapeOnly>(s, types, t);
  } else {
    UpdateTileOut<kParam, kGrad, ElementType::kBF16, kShapeOnly>(s, types, t);
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
  size_t i = 0;
  double sum = 0.0;
#if HWY_TARGET != HWY_SCALAR  // one lane: no halves to promote; the loop below does all
  const hn::ScalableTag<float> df;
  const hn::Half<decltype(df)> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const size_t lanes = hn::Lanes(df);
  auto sum_lower = hn::Zero(dd);
  auto sum_upper = hn::Zero(dd);
  if (count >= lanes) {
    for (; i <= count - lanes; i += lanes) {
      const auto g = LoadAsF32<kType>(df, grads, i);
      const auto lower = hn::PromoteTo(dd, hn::LowerHalf(dh, g));
      const auto upper = hn::PromoteTo(dd, hn::UpperHalf(dh, g));
      sum_lower = hn::MulAdd(lower, lower, sum_lower);
      sum_upper = hn::MulAdd(upper, upper, sum_upper);
    }
  }
  sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum_lower, sum_upper)));
#endif
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) {
    const double g = hn::GetLane(LoadAsF32<kType>(d1, grads, i));
    sum += g * g;
  }
  return sum;
}

double GradSqNormTile(const void* grads, ElementType type, size_t count) {
  switch (type) {
    case ElementType::kF32: return SumOfSquares<ElementType::kF32>(grads, count);
    case ElementType::kBF16: return SumOfSquares<ElementType::kBF16>(grads, count);
    case ElementType::kF16: return SumOfSquares<ElementType::kF16>(grads, count);
    default: return 0.0;  // not a kernel type: no elements
  }
}

// dst += float(src) * scale (the product rounded to float, then the sum), returning the sum of
// squares of the new dst values in double, promoted as SumOfSquares does.
template <ElementType kType>
double AccumulateScaled(float* HWY_RESTRICT dst, const void* HWY_RESTRICT src, size_t count, float scale) {
  size_t i = 0;
  double sum = 0.0;
#if HWY_TARGET != HWY_SCALAR
  const hn::ScalableTag<float> df;
  const hn::Half<decltype(df)> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const size_t lanes = hn::Lanes(df);
  const auto vscale = hn::Set(df, scale);
  auto sum_lower = hn::Zero(dd);
  auto sum_upper = hn::Zero(dd);
  if (count >= lanes) {
    for (; i <= count - lanes; i += lanes) {
      const auto v = hn::Add(hn::LoadU(df, dst + i), hn::Mul(LoadAsF32<kType>(df, src, i), vscale));
      hn::StoreU(v, df, dst + i);
      const auto lower = hn::PromoteTo(dd, hn::LowerHalf(dh, v));
      const auto upper = hn::PromoteTo(dd, hn::UpperHalf(dh, v));
      sum_lower = hn::MulAdd(lower, lower, sum_lower);
      sum_upper = hn::MulAdd(upper, upper, sum_upper);
    }
  }
  sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum_lower, sum_upper)));
#endif
  const hn::CappedTag<float, 1> d1;
  const auto scale1 = hn::Set(d1, scale);
  for (; i < count; ++i) {
    const auto v = hn::Add(hn::LoadU(d1, dst + i), hn::Mul(LoadAsF32<kType>(d1, src, i), scale1));
    hn::StoreU(v, d1, dst + i);
    const double value = hn::GetLane(v);
    sum += value * value;
  }
  return sum;
}

double AccumulateScaledTile(float* dst, const void* src, ElementType type, size_t count, float scale) {
  switch (type) {
    case ElementType::kF32: return AccumulateScaled<ElementType::kF32>(dst, src, count, scale);
    case ElementType::kBF16: return AccumulateScaled<ElementType::kBF16>(dst, src, count, scale);
    case ElementType::kF16: return AccumulateScaled<ElementType::kF16>(dst, src, count, scale);
  }
  return 0.0;
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace tierzero::cpu_adam::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tierzero::cpu_adam::detail {

HWY_EXPORT(AdamUpdateTile);
HWY_EXPORT(MemoryPassTile);
HWY_EXPORT(GradSqNormTile);
HWY_EXPORT(AccumulateScaledTile);
HWY_EXPORT(TargetName);

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

}  // namespace tierzero::cpu_adam::detail
#endif  // HWY_ONCE
