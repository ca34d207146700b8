// The CUDA launch of the exact compact master step (gpu_kernel.cu, built only with CUDA). Private to cpu_adam/;
// step_on_gpu (gpu_step.cpp) checks the buffers and calls it.
#pragma once

#include "cpu_adam/internal/step_arithmetic.h"

namespace tierzero::cpu_adam::detail {

// Threads per CUDA block: one per element of a moment block (gpu_step.cpp asserts it is kMomentBlock).
inline constexpr unsigned kGpuBlockThreads = 256;

// Enqueues the step of `state` (device pointers, count > 0; grads `grad`, moments `moment`) on
// `cuda_stream` (a cudaStream_t, or nullptr for the legacy default stream): each thread one element
// (with 8-bit moments one CUDA block per moment block), every operation step_arithmetic.h's with
// fused multiply-adds. Returns the cudaError_t of the launch
// (0: cudaSuccess); the kernel's own errors surface at the caller's next synchronization.
int launch_compact_step(const StepScalars& scalars, const CompactState& state, GradType grad, MomentType moment,
                        void* cuda_stream);

}  // namespace tierzero::cpu_adam::detail
