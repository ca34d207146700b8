// What every step of cpu_adam starts from, whichever code runs it (the SIMD kernels, the portable
// twin, the GPU kernel): the checks of its arguments and the scalars it computes once. Private to cpu_adam/.
#pragma once

#include <cstdint>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "cpu_adam/internal/step_arithmetic.h"

namespace tierzero::cpu_adam::detail {

// The buffer checks of CpuAdam::step (kInvalidArgument naming the buffer and the rule it breaks).
Status check_buffers(const AdamBuffers& b);

// The hyper-parameter checks of CpuAdam::step (ranges of lr, betas, eps, weight_decay; step >= 1).
Status check_hyper_params(const AdamHyperParams& hp, int64_t step);

// check_buffers, check_hyper_params and a finite grad_multiplier: everything CpuAdam::step refuses.
Status check_step(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier, const AdamBuffers& b);

// The scalars of at::_fused_adam(w)_ for step `step` (checked hyper-parameters): bias corrections in
// double, then rounded to float where torch rounds them.
StepScalars step_scalars(const AdamHyperParams& hp, int64_t step, float grad_multiplier);

// check_step, then the layout step_portable and step_on_gpu take (compact master, no params16; grads
// fp32, bf16 or fp16; moments fp32, bf16, or kI8 m with kU8 v), as raw pointers; kInvalidArgument
// naming `who` for another layout.
Result<CompactState> checked_compact_state(const char* who, const AdamHyperParams& hp, int64_t step_number,
                                           float grad_multiplier, const AdamBuffers& b);

// The GradType of a checked gradient buffer's element type (fp32, bf16 or fp16).
GradType grad_type_of(ElementType type);

// The MomentType of a checked exp_avg buffer's element type (fp32, bf16 or kI8).
MomentType moment_type_of(ElementType type);

}  // namespace tierzero::cpu_adam::detail
