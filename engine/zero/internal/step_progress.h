// How far an optimizer step running on another thread has written the new weights into this rank's
// compute partition. The offloaded CPU Adam steps the partition front to back while the next
// step's forward already runs: a unit's fetch waits only until the elements it reads are final
// (wait_for), and takes the device copies the optimizer queued for them (PartitionWrite), so the
// first layers compute while Adam is still on the last ones. Elements [0, ready) are final; ready
// only grows within a step. One writer thread (the optimizer), one reader thread (the engine's).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "common/common.h"
#include "engine/zero/internal/offload_stack.h"

namespace tierzero::engine {

class StepProgress {
 public:
  // A step of `total` elements begins: none is final. Call before the writer starts.
  void start(int64_t total);
  // Writer: elements [0, end) are final, and `writes` (device copies into them, if any) are queued.
  void publish(int64_t end, std::vector<PartitionWrite> writes);
  // Writer: the step failed with `error`; waiters throw it.
  void fail(Status error);
  // Blocks until elements [0, end) are final (end is clamped to the step's total), then returns the
  // writes published since the last take. Throws tierzero::Error with the writer's error if it
  // failed first. With measure_idle, a wait that blocks opens an IdleGap on the reader's device.
  std::vector<PartitionWrite> wait_for(int64_t end);
  // From now on, measure how long the reader's device sits idle while wait_for blocks (`copies`
  // outlives this; null stops).
  void measure_idle(DeviceCopies* copies) { copies_ = copies; }
  // Seconds the reader's device sat idle in the waits since the last call (IdleGap::seconds: waits
  // for the device to pass the last gap's end), and resets the count.
  double take_idle_seconds();

 private:
  std::mutex mutex_;
  std::condition_variable advanced_;
  int64_t total_ = 0;
  int64_t ready_ = 0;
  Status error_;
  std::vector<PartitionWrite> writes_;
  DeviceCopies* copies_ = nullptr;
  std::vector<std::unique_ptr<IdleGap>> gaps_;  // the reader's (only it touches them)
};

}  // namespace tierzero::engine
