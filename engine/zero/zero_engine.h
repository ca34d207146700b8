// The ZeRO engine: one model, its partitioned parameters, gradients and optimizer, over one
// process group. A training step reads, on every rank:
//
//   for each micro-batch:   loss = engine.forward_backward(ids, targets, loss_scale / accumulation)
//   outcome = engine.step(lr, loss_scale)   // skipped (outcome.overflow) when gradients overflowed
//
// forward_backward runs the model unit by unit (unit_function.h): each unit's parameters are
// fetched from the partitioner before it runs and released after; backward recomputes each unit
// and hands its parameter gradients to the partitioner, which reduces them across ranks while
// backward continues. step() finishes the reductions, takes the global gradient norm, detects
// fp16 overflow, unscales and clips like DeepSpeed, steps the optimizer on this rank's partition
// and publishes the new 16-bit parameters to every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "engine/model/functional_model.h"
#include "engine/zero/comm.h"
#include "engine/zero/partition_optimizer.h"
#include "engine/zero/partitioner.h"

namespace tierzero::engine {

struct ZeroEngineOptions {
  PartitionOptions partition;      // stage, dtypes, bucket sizes (grad_device is set by the engine)
  AdamConfig adam;
  bool offload_optimizer = false;  // optimizer state and step on the CPU (cpu_adam)
  int cpu_threads = 0;             // CPU optimizer threads; 0 = all cores
  double gradient_clipping = 0.0;  // max global gradient norm; 0 = none
};

// What step() did.
struct StepOutcome {
  bool overflow = false;   // inf/NaN in the gradients: the step was skipped, gradients dropped
  double grad_norm = 0.0;  // global L2 norm of the unscaled gradient (inf/NaN on overflow)
};

class ZeroEngine {
 public:
  // Partitions `params` (name -> whole tensor, any float dtype, every parameter of `model`,
  // identical on every rank) over `comm`'s ranks. `model` and `comm` must outlive the engine.
  // Throws tierzero::Error when a parameter is missing or an option is unsupported.
  ZeroEngine(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params,
             const ZeroEngineOptions& options, Comm& comm);

  // Runs one micro-batch: input_ids and targets [B, T] int64 (targets already shifted: position
  // t predicts targets[t]; -100 ignored). Backpropagates loss * loss_multiplier (the loss scale
  // over the accumulation steps) into the partitioned gradients. Returns this rank's mean
  // cross-entropy loss, unscaled.
  double forward_backward(const at::Tensor& input_ids, const at::Tensor& targets, double loss_multiplier);

  // Ends the accumulation window: reduces, checks overflow (gradients hold loss * loss_scale),
  // unscales and clips by the global norm, steps the optimizer with learning rate `lr` (unless
  // overflow) and zeroes the gradients. A collective.
  StepOutcome step(double lr, double loss_scale);

  // The fp32 master weights, whole, on the CPU. A collective.
  std::map<std::string, at::Tensor> master_params();

  // Rewrites the compute weights from the fp32 master weights on every rank (after the
  // optimizer state was loaded). A collective.
  void sync_compute_params();

  // Mean of `value` over the ranks (for logging). A collective.
  double mean_over_ranks(double value);

  Comm& comm() { return comm_; }
  const FunctionalModel& model() const { return model_; }
  Partitioner& partitioner() { return *partitioner_; }
  PartitionOptimizer& optimizer() { return *optimizer_; }
  const ZeroEngineOptions& options() const { return options_; }

 private:
  const FunctionalModel& model_;
  Comm& comm_;
  ZeroEngineOptions options_;
  std::unique_ptr<Partitioner> partitioner_;
  std::unique_ptr<PartitionOptimizer> optimizer_;
};

}  // namespace tierzero::engine
