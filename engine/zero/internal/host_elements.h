// Host tensors as cpu_adam sees them: spans of fp32 / bf16 / fp16 elements. Shared by the CPU and
// NVMe optimizers and the gradient landing pipeline.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/compute_weights_sink.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {

// The element type of a float tensor cpu_adam steps (fp32, bf16, fp16); throws tierzero::Error
// (internal) naming `what` and the dtype for any other.
ElementType float_element_type(at::ScalarType type, const char* what);

// Elements [begin, begin + count) of contiguous host tensor `t`.
cpu_adam::Elements tensor_elements(const at::Tensor& t, int64_t begin, int64_t count);

// Sum of squares of gradient partition `grad` (any float dtype and device), in double; inf when an
// element is not finite.
double host_grad_sq_norm(const cpu_adam::CpuAdam& adam, const at::Tensor& grad);

// cpu_adam's hyper-parameters for the optimizer `config` at learning rate `lr`.
cpu_adam::AdamHyperParams cpu_adam_hyper_params(const AdamConfig& config, double lr);

// Where an offloaded optimizer writes the new 16-bit weights of `compute_partition` (`numel`
// elements).
struct SixteenBitOutput {
  bool sixteen_bit = false;            // the compute partition is bf16 / fp16 (else nothing is written)
  bool in_place = false;               // the kernel writes compute_partition itself (host memory)
  at::Tensor out;                      // what the kernel writes: compute_partition, or the staging buffer
  ComputeWeightsSink* sink = nullptr;  // the partition is on NVMe: each range goes through a lent window
};
// Through `sink` when compute_partition is undefined (parameters on NVMe); in place when the
// partition is 16-bit, contiguous and in host memory (ZeRO-3 offloaded parameters, a CPU run); else
// into `staging`, copied to the device after each sub-group. Throws tierzero::Error (internal,
// naming `who`) when a device partition needs a staging buffer of its dtype and `numel` and
// `staging` is not one, or an undefined partition has no sink.
SixteenBitOutput sixteen_bit_output(const at::Tensor& compute_partition, const at::Tensor& staging, int64_t numel,
                                    const char* who, ComputeWeightsSink* sink);

}  // namespace tierzero::engine
