// The bulk conversions of float_convert.h, compiled for every target foreach_target.h selects.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "common/float_convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "common/common-inl.h"
#include "common/internal/float_convert.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace tierzero::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// out[i] = in[i] rounded to kType, whole vectors then one lane at a time.
template <ElementType kType>
void Round(const float* HWY_RESTRICT in, void* HWY_RESTRICT out, size_t count) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) StoreFromF32<kType>(df, hn::LoadU(df, in + i), out, i);
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) StoreFromF32<kType>(d1, hn::LoadU(d1, in + i), out, i);
}

// out[i] = in[i] of kType widened to float, whole vectors then one lane at a time.
template <ElementType kType>
void Widen(const void* HWY_RESTRICT in, float* HWY_RESTRICT out, size_t count) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) hn::StoreU(LoadAsF32<kType>(df, in, i), df, out + i);
  const hn::CappedTag<float, 1> d1;
  for (; i < count; ++i) hn::StoreU(LoadAsF32<kType>(d1, in, i), d1, out + i);
}

void FloatsToBF16(const float* in, void* out, size_t count) { Round<ElementType::kBF16>(in, out, count); }
void FloatsToF16(const float* in, void* out, size_t count) { Round<ElementType::kF16>(in, out, count); }
void BF16ToFloats(const void* in, float* out, size_t count) { Widen<ElementType::kBF16>(in, out, count); }
void F16ToFloats(const void* in, float* out, size_t count) { Widen<ElementType::kF16>(in, out, count); }

}  // namespace tierzero::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tierzero {

HWY_EXPORT(FloatsToBF16);
HWY_EXPORT(FloatsToF16);
HWY_EXPORT(BF16ToFloats);
HWY_EXPORT(F16ToFloats);

void floats_to_bf16(std::span<const float> in, void* out) {
  HWY_DYNAMIC_DISPATCH(FloatsToBF16)(in.data(), out, in.size());
}

void floats_to_fp16(std::span<const float> in, void* out) {
  HWY_DYNAMIC_DISPATCH(FloatsToF16)(in.data(), out, in.size());
}

void bf16_to_floats(const void* in, std::span<float> out) {
  HWY_DYNAMIC_DISPATCH(BF16ToFloats)(in, out.data(), out.size());
}

void fp16_to_floats(const void* in, std::span<float> out) {
  HWY_DYNAMIC_DISPATCH(F16ToFloats)(in, out.data(), out.size());
}

}  // namespace tierzero
#endif  // HWY_ONCE
