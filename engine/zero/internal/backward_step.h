// The optimizer step run inside the backward. Without gradient clipping and without a loss-scale
// overflow check (bf16 or fp32), an offloaded Adam needs nothing from a sub-group but that
// sub-group's own gradients. The window pass (window_pass.h) finishes the units last to first, each
// with its gradients summed over every micro-batch, so once unit u's gradients are reduced and
// landed in the host partition, every partition element whose parameter is used only by units >= u
// is final for the step. Adam steps those sub-groups, last to first, while the GPU differentiates
// the units below; step() waits only for the last ones (the embedding's). A step then costs about
// forward + max(backward, CPU Adam) instead of max(forward, CPU Adam) + backward, with the same
// results bit for bit (Adam is elementwise and reads the same final gradients).
//
// Why it waits for the landing and not the reduction: a unit's gradients reach the host partition
// through the gradient pipeline (host_grad_pipeline.h), in order; a notification queued behind
// them fires once they are all there.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/zero/internal/grads_final.h"
#include "engine/zero/internal/host_grad_pipeline.h"
#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/partitioner.h"

namespace tierzero::engine {

// The most records of `record_numel` elements of rank 0's partition that the window's backward
// holds gradients for at once before the optimizer may read one: while unit u lands, the records
// units u..last touched that are not yet final. The gradient ring needs at least that many slots.
int64_t grad_ring_records_needed(const FunctionalModel& model, const Partitioner& partitioner, int64_t record_numel);

class BackwardStep {
 public:
  // Steps inside the backward of `model` over `partitioner` (can_hand_over_grads()), whose gradients
  // land through `pipeline`; all three outlive this object.
  BackwardStep(const FunctionalModel& model, Partitioner& partitioner, HostGradPipeline& pipeline);
  // Stops a step still in flight (it throws on its thread) and joins it.
  ~BackwardStep();
  BackwardStep(const BackwardStep&) = delete;
  BackwardStep& operator=(const BackwardStep&) = delete;

  // Starts optimizer.step(grad, grad_multiplier, lr, compute_partition, nullptr, grads_final) on a
  // thread of its own; call before the backward lands the first gradient. `optimizer` outlives the
  // step.
  void start(PartitionOptimizer& optimizer, const at::Tensor& grad, double grad_multiplier, double lr,
             const at::Tensor& compute_partition);
  // Unit `unit`'s gradients (every micro-batch's) were given to the partitioner: hands them on to
  // the pipeline and marks final, once they have landed, what they complete.
  void unit_done(size_t unit);
  // The backward failed: the step in flight stops with `error` (finish() rethrows it).
  void abandon(Status error);

  // After the backward, once every gradient has landed: marks the whole partition final, waits for
  // the step and returns its wall time on its thread. Throws the step's error, if any.
  double finish();

 private:
  Partitioner& partitioner_;
  HostGradPipeline& pipeline_;
  std::vector<int64_t> final_from_;  // by unit: grads_final_from_by_unit
  GradsFinal grads_final_;
  std::exception_ptr error_;  // the step's, set on its thread before it ends
  double step_seconds_ = 0.0;
  std::thread thread_;
};

}  // namespace tierzero::engine
