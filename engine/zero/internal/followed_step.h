// The optimizer step that follows into the next forward (zero_engine.h): step() starts it on a
// thread of its own and returns, and the next forward's fetches wait, through its StepProgress, only
// for the slices they read. This object owns that thread; join() is where it ends, and the engine
// calls it only where the step's results are needed whole: before a backward lands gradients into
// the partition the step reads, before the next step, before the master or the optimizer state is
// read (master_params, sync_compute_params, checkpoints, exports, evaluation), and when the trainer
// asks (ZeroEngine::finish_step, to hear the last step's error).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <thread>

#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/partitioner.h"
#include "engine/zero/internal/step_progress.h"

namespace tierzero::engine {

class FollowedStep {
 public:
  // Steps `optimizer` over `partitioner`'s partitions, its device copies queued on `copies`' side
  // stream; all three outlive this object. Hands its progress to the partitioner (follow_step); with
  // `measure_idle`, the forward's waits on it measure the device's idle time.
  FollowedStep(Partitioner& partitioner, PartitionOptimizer& optimizer, DeviceCopies& copies, bool measure_idle);
  // Joins a step still running; its error reaches no one now.
  ~FollowedStep();
  FollowedStep(const FollowedStep&) = delete;
  FollowedStep& operator=(const FollowedStep&) = delete;

  // Starts optimizer.step(grad, grad_multiplier, lr, compute partition, progress) on the thread,
  // after the reads of the compute partition queued on the device so far. Not while one runs.
  void start(const at::Tensor& grad, double grad_multiplier, double lr);
  bool running() const { return thread_.joinable(); }

  // What a joined step took, in seconds: its wall time on its thread, the caller's wait for it, and
  // the device's idle time in the forward's waits (0 without measure_idle).
  struct Joined {
    double step_s = 0.0;
    double joined_s = 0.0;
    double idle_s = 0.0;
  };
  // Waits for the step in flight, hands the partitioner the device copies no read has taken yet and
  // zeroes the gradients the step read; nullopt when none runs. Throws the step's error.
  std::optional<Joined> join();

 private:
  Partitioner& partitioner_;
  PartitionOptimizer& optimizer_;
  DeviceCopies& copies_;
  StepProgress progress_;
  double step_seconds_ = 0.0;  // the step's wall time, set on its thread
  std::thread thread_;
};

}  // namespace tierzero::engine
