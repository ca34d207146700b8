// step_on_gpu and cuda_device_count: the checks of the exact step, then the CUDA launch
// (gpu_kernel.cu) when this build has CUDA.
#include <string>

#include "cpu_adam/adam.h"
#include "cpu_adam/internal/step_setup.h"

#ifdef TIERZERO_HAVE_CUDA
#include <cuda_runtime.h>

#include "cpu_adam/internal/gpu_kernel.h"
#endif

namespace tierzero::cpu_adam {

#ifdef TIERZERO_HAVE_CUDA
static_assert(detail::kGpuBlockThreads == kMomentBlock, "one CUDA thread per element of a moment block");

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // no driver or no device: clear the error, report none
    return 0;
  }
  return count;
}

Status step_on_gpu(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                   const AdamBuffers& device_buffers, void* cuda_stream) {
  TZ_ASSIGN_OR_RETURN(const detail::CompactState state,
                      detail::checked_compact_state("step_on_gpu", hp, step_number, grad_multiplier, device_buffers));
  if (state.count == 0) return {};
  constexpr size_t kMaxBlocks = 0x7FFFFFFF;  // CUDA's grid x limit
  if (moment_block_count(state.count) > kMaxBlocks) {
    return invalid_argument("step_on_gpu: " + std::to_string(state.count) + " elements exceed one launch (" +
                            std::to_string(kMaxBlocks) + " blocks of " + std::to_string(kMomentBlock) +
                            "); step them in parts that start on a block boundary");
  }
  const int error = detail::launch_compact_step(detail::step_scalars(hp, step_number, grad_multiplier), state,
                                                detail::grad_type_of(device_buffers.grads.type),
                                                detail::moment_type_of(device_buffers.exp_avg.type), cuda_stream);
  if (error != cudaSuccess) {
    const auto e = static_cast<cudaError_t>(error);
    return internal_error(std::string("step_on_gpu: kernel launch failed: ") + cudaGetErrorName(e) + " (" +
                          cudaGetErrorString(e) + ")");
  }
  return {};
}
#else
int cuda_device_count() { return 0; }

Status step_on_gpu(const AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                   const AdamBuffers& device_buffers, void* cuda_stream) {
  TZ_RETURN_IF_ERROR(
      detail::checked_compact_state("step_on_gpu", hp, step_number, grad_multiplier, device_buffers).status());
  return unsupported(
      "step_on_gpu: this build has no CUDA; configure with -DTIERZERO_WITH_CUDA=ON on a machine with nvcc");
}
#endif

}  // namespace tierzero::cpu_adam
