// The exact compact master step on a CUDA device: step_arithmetic.h's operations, one thread per
// element; with 8-bit moments one CUDA block per moment block. Built with -fmad=false -ftz=false
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

// 8-bit moments: CUDA block b steps moment block b, thread j its element j, then encodes the block with the
// maxima of the new |m| and v (UpdateTile8's encoding, the same bytes).
template <GradType kGrad>
__global__ void __launch_bounds__(kGpuBlockThreads) step_compact8(StepScalars s, CompactState t) {
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
    static_cast<uint8_t*>(t.m)[i] = exact::encode_moment<true>(m, m_encoding);
    static_cast<uint8_t*>(t.v)[i] = exact::encode_moment<false>(v, v_encoding);
  }
  if (threadIdx.x == 0) {
    t.m_scales[block] = m_encoding.scale;
    t.v_scales[block] = v_encoding.scale;
  }
}

// fp32 or bf16 moments: every element on its own.
template <GradType kGrad, MomentType kMoment>
__global__ void __launch_bounds__(kGpuBlockThreads) step_compact(StepScalars s, CompactState t) {
  const size_t i = static_cast<size_t>(blockIdx.x) * kGpuBlockThreads + threadIdx.x;
  if (i < t.count) exact::step_compact_element<true, kGrad, kMoment>(s, t, i);
}

template <GradType kGrad>
void launch_for_moments(const StepScalars& s, const CompactState& t, MomentType moment, unsigned blocks,
                        cudaStream_t stream) {
  switch (moment) {
    case MomentType::kF32: step_compact<kGrad, MomentType::kF32><<<blocks, kGpuBlockThreads, 0, stream>>>(s, t); break;
    case MomentType::kBF16:
      step_compact<kGrad, MomentType::kBF16><<<blocks, kGpuBlockThreads, 0, stream>>>(s, t);
      break;
    case MomentType::kInt8: step_compact8<kGrad><<<blocks, kGpuBlockThreads, 0, stream>>>(s, t); break;
  }
}

}  // namespace

int launch_compact_step(const StepScalars& scalars, const CompactState& state, GradType grad, MomentType moment,
                        void* cuda_stream) {
  const unsigned blocks = static_cast<unsigned>((state.count + kGpuBlockThreads - 1) / kGpuBlockThreads);
  const auto stream = static_cast<cudaStream_t>(cuda_stream);
  switch (grad) {
    case GradType::kF32: launch_for_moments<GradType::kF32>(scalars, state, moment, blocks, stream); break;
    case GradType::kBF16: launch_for_moments<GradType::kBF16>(scalars, state, moment, blocks, stream); break;
    case GradType::kF16: launch_for_moments<GradType::kF16>(scalars, state, moment, blocks, stream); break;
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace tierzero::cpu_adam::detail
