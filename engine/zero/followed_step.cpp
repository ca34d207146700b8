#include "engine/zero/internal/followed_step.h"

#include <ATen/record_function.h>

#include <chrono>
#include <string>

#include "engine/zero/internal/traced_thread.h"

namespace tierzero::engine {
FollowedStep::FollowedStep(Partitioner& partitioner, PartitionOptimizer& optimizer, DeviceCopies& copies,
                           bool measure_idle)
    : partitioner_(partitioner), optimizer_(optimizer), copies_(copies) {
  partitioner_.follow_step(&progress_);
  if (measure_idle) progress_.measure_idle(&copies_);
}

FollowedStep::~FollowedStep() {
  if (thread_.joinable()) thread_.join();
}

void FollowedStep::start(const at::Tensor& grad, double grad_multiplier, double lr) {
  const at::Tensor compute = partitioner_.compute_partition();  // no read of the old values is left
  // The step's copies into a device partition run on the side stream, unordered with the current
  // one: the reads queued on it so far must be done first.
  if (compute.defined()) sync_current_stream(compute.device());
  progress_.start(partitioner_.partition_numel());
  thread_ = std::thread([this, grad, grad_multiplier, lr, compute, traced = TracedFrom()] {
    name_this_thread("tz-optimizer");
    const TracedFrom::Scope scope(traced);
    RECORD_USER_SCOPE("tierzero::optimizer_step");
    const auto start = std::chrono::steady_clock::now();
    try {
      // The copies it queues are ordered after the side stream only, not after the forward's work.
      copies_.after_device_copies([&] { optimizer_.step(grad, grad_multiplier, lr, compute, &progress_, nullptr); });
    } catch (const Error& e) {
      progress_.fail(e.status());
    } catch (const std::exception& e) {
      progress_.fail(internal_error(std::string("the offloaded optimizer step failed: ") + e.what()));
    }
    step_seconds_ = seconds_since(start);
  });
}

std::optional<FollowedStep::Joined> FollowedStep::join() {
  if (!thread_.joinable()) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  {
    RECORD_USER_SCOPE("tierzero::join_optimizer");
    thread_.join();
  }
  Joined joined{.step_s = step_seconds_, .joined_s = seconds_since(start), .idle_s = 0.0};
  // The copies no read has taken yet; throws the step's error.
  partitioner_.defer_reads(progress_.wait_for(partitioner_.partition_numel()));
  partitioner_.zero_grads();
  // The forward's phase ran from one stream sync to the next: its device time is the compute plus
  // the gaps its fetches left while they waited for the step.
  joined.idle_s = progress_.take_idle_seconds();  // 0 without measure_idle
  return joined;
}

}  // namespace tierzero::engine
