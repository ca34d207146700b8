// The CUDA launch of the exact compact master + 8-bit moments step (gpu_kernel.cu, built only with
// CUDA). Private to cpu_adam/; step_on_gpu (gpu_step.cpp) checks the buffers and calls it.
#pragma once

#include "cpu_adam/internal/step_arithmetic.h"

namespace tierzero::cpu_adam::detail {

// Threads per CUDA block: one per element of a moment block (gpu_step.cpp asserts it is kMomentBlock).
inline constexpr unsigned kGpuBlockThreads = 256;

// Enqueues the step of `state` (device pointers, count > 0) on `cuda_stream` (a cudaStream_t, or
// nullptr for the legacy default stream): one CUDA block per moment block, each thread one element,
// every operation step_arithmetic.h's with fused multiply-adds. Returns the cudaError_t of the launch
// (0: cudaSuccess); the kernel's own errors surface at the caller's next synchronization.
int launch_compact8_step(const StepScalars& scalars, const Compact8State& state, GradType grad, void* cuda_stream);

}  // namespace tierzero::cpu_adam::detail
