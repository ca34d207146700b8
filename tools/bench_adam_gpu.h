// The GPU line of `tierzero bench adam --master compact --moments int8`: cpu_adam::step_on_gpu on the
// bench's state, from pinned host memory to the device and back, as an offloaded optimizer stepping a
// share of its sub-groups on the GPU would move it.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"
#include "cpu_adam/adam.h"

namespace tierzero::tools {

struct GpuAdamRates {
  std::string device;              // "NVIDIA H100 80GB HBM3 (device 0)"
  double kernel_gparams = 0;       // the state resident on the GPU: the kernel alone
  double pcie_gparams = 0;         // each step uploads state + grads and downloads the state (pinned memory)
  double h2d_bytes_per_param = 0;  // bf16 hi + int16 residual + m + v codes + scales + grads
  double d2h_bytes_per_param = 0;  // the state back
  bool exact = false;              // the GPU's first step equals step_portable's (fused) bytes on a prefix
};

// Times `steps` GPU steps (after a warm-up) of the compact master + 8-bit moment state `host` (host
// memory, read only: the GPU steps copies), the kernel alone and with the copies (chunks of 2^22 elements
// over two streams, so one chunk's upload overlaps another's download). kUnsupported when this build has
// no CUDA or there is no device; kInvalidArgument for another layout (step_on_gpu's checks).
Result<GpuAdamRates> measure_gpu_adam(const cpu_adam::AdamBuffers& host, const cpu_adam::AdamHyperParams& hp,
                                      int steps);

}  // namespace tierzero::tools
