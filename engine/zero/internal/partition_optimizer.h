// The optimizer of one rank's partition: Adam / AdamW on fp32 master weights with moments m, v.
// Two placements share this interface:
//   device: master, m, v on the compute device, stepped by LibTorch's fused AdamW kernel;
//   cpu offload: master, m, v in (pinned when CUDA exists) host memory, stepped by cpu_adam's
//       SIMD kernel, which writes the 16-bit copy of the new weights in the same pass.
// state() is the seam where the state is read and written (checkpoints now; an NVMe-backed store
// can implement the same interface later).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace tierzero::engine {

struct AdamConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled_weight_decay = true;  // AdamW; false: Adam with L2 added to the gradient
  bool bias_correction = true;
};

// One rank's optimizer state: flat fp32 partitions and the number of steps applied.
struct AdamPartitionState {
  at::Tensor master;
  at::Tensor exp_avg;
  at::Tensor exp_avg_sq;
  int64_t step = 0;
};

class PartitionOptimizer {
 public:
  virtual ~PartitionOptimizer() = default;

  // Sum of squares of this rank's gradient partition `grad` (any float dtype), in double; inf or
  // NaN when an element is not finite.
  virtual double grad_sq_norm(const at::Tensor& grad) = 0;

  // Applies Adam step state().step + 1 with learning rate `lr` to the master weights, using
  // grad * grad_multiplier (the unscale and clip factor) as the gradient, then writes the updated
  // weights, cast, into `compute_partition` (same numel; compute dtype and device).
  virtual void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition) = 0;

  // The state, read and written in place (checkpoint save / load).
  virtual AdamPartitionState& state() = 0;

  // Bytes of pinned host memory this optimizer holds (0 on the device).
  virtual int64_t pinned_bytes() const = 0;
  // "device" or "cpu (<SIMD target>, N threads)".
  virtual std::string placement() const = 0;
};

// Adam on the device holding `master_partition` (fp32); m and v start at zero.
std::unique_ptr<PartitionOptimizer> make_device_adam(at::Tensor master_partition, const AdamConfig& config);

// Adam offloaded to the CPU with cpu_adam on `threads` threads (0: all cores); the state is copied
// to host memory, pinned when CUDA is available. The 16-bit copy is written by the kernel for
// bf16 / fp16 compute partitions.
std::unique_ptr<PartitionOptimizer> make_cpu_offload_adam(const at::Tensor& master_partition, const AdamConfig& config,
                                                          int threads);

}  // namespace tierzero::engine
