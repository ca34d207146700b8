// The exact compact master + 8-bit moments step on a CUDA device: step_arithmetic.h's operations, one
// thread per element and one CUDA block per moment block. Built with -fmad=false -ftz=false
// -prec-div=true -prec-sqrt=true (cpu_adam/CMakeLists.txt); the operations are explicit
// round-to-nearest intrinsics anyway, so the bits are those of step_portable with kFused.
#include <cuda_runtime.h>

#include "cpu_adam/internal/gpu_kernel.h"
#include "cpu_adam/internal/step_arithmetic.h"

namespace tierzero::cpu_adam::detail {
namespace {

constexpr unsigned kWarps = kGpuBlockThreads / 32;

// The largest of every thread's `x` in the block (non-negative, non-NaN values: the order of the
// comparisons does not change the result), returned to every thread.
__device__ float block_max(float x, float* warp_maxima) {
  for (int offset = 16; offset > 0; offset >>= 1) x = exact::max_of(x, __shfl_xor_sync(0xFFFFFFFFu, x, offset));
  if (threadIdx.x % 32 == 0) warp_maxima[threadIdx.x / 32] = x;
  __syncthreads();
  float result = warp_maxima[0];
  for (unsigned w = 1; w < kWarps; ++w) result = exact::max_of(result, warp_maxima[w]);
  return result;
}

template <GradType kGrad>
__global__ void __launch_bounds__(kGpuBlockThreads) step_compact8(StepScalars s, Compact8State t) {
  __shared__ float m_maxima[kWarps];
  __shared__ float v_maxima[kWarps];
  const size_t block = blockIdx.x;
  const size_t i = block * kGpuBlockThreads + threadIdx.x;
  const bool live = i < t.count;
  float m = 0.0f, v = 0.0f;
  if (live) exact::step_compact8_element<true, kGrad>(s, t, block, i, m, v);
  // Every thread has read the block's old scales before the first barrier; thread 0 writes them after.
  const exact::BlockEncoding m_encoding = exact::block_encoding(block_max(exact::magnitude(m), m_maxima));
  const exact::BlockEncoding v_encoding = exact::block_encoding(block_max(v, v_maxima));
  if (live) {
    t.m_codes[i] = exact::encode_moment<true>(m, m_encoding);
    t.v_codes[i] = exact::encode_moment<false>(v, v_encoding);
  }
  if (threadIdx.x == 0) {
    t.m_scales[block] = m_encoding.scale;
    t.v_scales[block] = v_encoding.scale;
  }
}

}  // namespace

int launch_compact8_step(const StepScalars& scalars, const Compact8State& state, GradType grad, void* cuda_stream) {
  const unsigned blocks = static_cast<unsigned>((state.count + kGpuBlockThreads - 1) / kGpuBlockThreads);
  const auto stream = static_cast<cudaStream_t>(cuda_stream);
  switch (grad) {
    case GradType::kF32: step_compact8<GradType::kF32><<<blocks, kGpuBlockThreads, 0, stream>>>(scalars, state); break;
    case GradType::kBF16:
      step_compact8<GradType::kBF16><<<blocks, kGpuBlockThreads, 0, stream>>>(scalars, state);
      break;
    case GradType::kF16: step_compact8<GradType::kF16><<<blocks, kGpuBlockThreads, 0, stream>>>(scalars, state); break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tierzero::cpu_adam::detail
