// step_portable: the compact master step one element at a time, from the host compile of
// step_arithmetic.h (built with -ffp-contract=off, like kernels.cpp).
#include <algorithm>
#include <string>

#include "cpu_adam/adam.h"
#include "cpu_adam/internal/kernels.h"
#include "cpu_adam/internal/step_arithmetic.h"
#include "cpu_adam/internal/step_setup.h"

namespace tierzero::cpu_adam {

namespace detail {

GradType grad_type_of(ElementType type) {
  if (type == ElementType::kBF16) return GradType::kBF16;
  if (type == ElementType::kF16) return GradType::kF16;
  return GradType::kF32;
}

MomentType moment_type_of(ElementType type) {
  if (type == ElementType::kBF16) return MomentType::kBF16;
  if (type == ElementType::kI8) return MomentType::kInt8;
  return MomentType::kF32;
}

Result<CompactState> checked_compact_state(const char* who, const AdamHyperParams& hp, int64_t step_number,
                                           float grad_multiplier, const AdamBuffers& b) {
  TZ_RETURN_IF_ERROR(check_step(hp, step_number, grad_multiplier, b));
  const size_t count = b.params_16bit.count + b.params.size();  // check_step: at most one of them is set
  if (count > 0 && b.master_residual.empty()) {
    return invalid_argument(std::string(who) +
                            " takes the compact master (bf16 params_16bit with master_residual); use CpuAdam::step "
                            "for fp32 or 16-bit params");
  }
  const bool eight = b.exp_avg.type == ElementType::kI8;
  return CompactState{
      .hi = static_cast<uint16_t*>(b.params_16bit.data),
      .residual = b.master_residual.data(),
      .grads = b.grads.data,
      .m = b.exp_avg.data,
      .v = b.exp_avg_sq.data,
      .m_scales = eight ? b.exp_avg_scales.data() : nullptr,
      .v_scales = eight ? b.exp_avg_sq_scales.data() : nullptr,
      .count = b.params_16bit.count,
  };
}

}  // namespace detail

namespace {

using detail::CompactState;
using detail::GradType;
using detail::MomentType;
using detail::StepScalars;

// Every block of 8-bit `t`: each element decoded, stepped and its master stored in element order, the block's
// maxima of |m| and v kept, then the block encoded with them (UpdateTile8's order, element by element).
template <bool kFused, GradType kGrad>
void step_blocks(const StepScalars& s, const CompactState& t) {
  float m_new[kMomentBlock];
  float v_new[kMomentBlock];
  for (size_t begin = 0, b = 0; begin < t.count; begin += kMomentBlock, ++b) {
    const size_t n = std::min(kMomentBlock, t.count - begin);
    float m_max = 0.0f, v_max = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      detail::exact::step_compact8_element<kFused, kGrad>(s, t, b, begin + j, m_new[j], v_new[j]);
      m_max = detail::exact::max_of(m_max, detail::exact::magnitude(m_new[j]));
      v_max = detail::exact::max_of(v_max, v_new[j]);
    }
    const detail::exact::BlockEncoding m_encoding = detail::exact::block_encoding(m_max);
    const detail::exact::BlockEncoding v_encoding = detail::exact::block_encoding(v_max);
    for (size_t j = 0; j < n; ++j) {
      static_cast<uint8_t*>(t.m)[begin + j] = detail::exact::encode_moment<true>(m_new[j], m_encoding);
      static_cast<uint8_t*>(t.v)[begin + j] = detail::exact::encode_moment<false>(v_new[j], v_encoding);
    }
    t.m_scales[b] = m_encoding.scale;
    t.v_scales[b] = v_encoding.scale;
  }
}

// Every element of `t` with fp32 or bf16 moments, in order.
template <bool kFused, GradType kGrad, MomentType kMoment>
void step_elements(const StepScalars& s, const CompactState& t) {
  for (size_t i = 0; i < t.count; ++i) detail::exact::step_compact_element<kFused, kGrad, kMoment>(s, t, i);
}

template <bool kFused, GradType kGrad>
void step_moments(const StepScalars& s, const CompactState& t, MomentType moment) {
  switch (moment) {
    case MomentType::kF32: return step_elements<kFused, kGrad, MomentType::kF32>(s, t);
    case MomentType::kBF16: return step_elements<kFused, kGrad, MomentType::kBF16>(s, t);
    case MomentType::kInt8: return step_blocks<kFused, kGrad>(s, t);
  }
}

template <bool kFused>
void step_all(const StepScalars& s, const CompactState& t, GradType grad, MomentType moment) {
  switch (grad) {
    case GradType::kF32: return step_moments<kFused, GradType::kF32>(s, t, moment);
    case GradType::kBF16: return step_moments<kFused, GradType::kBF16>(s, t, moment);
    case GradType::kF16: return step_moments<kFused, GradType::kF16>(s, t, moment);
  }
}

}  // namespace

MulAddRounding simd_target_mul_add() {
  return detail::dispatched_target_fuses() ? MulAddRounding::kFused : MulAddRounding::kSeparate;
}

Status step_portable(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier, const AdamBuffers& buffers,
                     MulAddRounding mul_add) {
  TZ_ASSIGN_OR_RETURN(const CompactState state,
                      detail::checked_compact_state("step_portable", hp, step_number, grad_multiplier, buffers));
  const StepScalars scalars = detail::step_scalars(hp, step_number, grad_multiplier);
  const GradType grad = detail::grad_type_of(buffers.grads.type);
  const MomentType moment = detail::moment_type_of(buffers.exp_avg.type);
  if (mul_add == MulAddRounding::kFused) {
    step_all<true>(scalars, state, grad, moment);
  } else {
    step_all<false>(scalars, state, grad, moment);
  }
  return {};
}

}  // namespace tierzero::cpu_adam
