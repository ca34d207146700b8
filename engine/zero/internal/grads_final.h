// How much of this rank's gradient partition is final for the step while its backward still runs.
// With the optimizer stepped inside the backward (zero_engine.h), Adam reads a sub-group only once
// its gradients are final. The backward runs the units last to first and the partition holds their
// parameters first to last, so what is final is a suffix [from, numel) that only grows toward 0.
// One or more writers (the engine's thread, the gradient pipeline's worker), one reader (the
// optimizer's thread). Where the gradients land in a ring of record-sized slots instead of a whole
// partition (host_grad_pipeline.h), the reader takes each final piece's gradients from the
// HostGradPipeline that lends them and tells it once it has read them for good, so the slot can
// take the next record.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/common.h"

namespace tierzero::engine {

class HostGradPipeline;  // host_grad_pipeline.h

class GradsFinal {
 public:
  // A step of `numel` gradient elements begins: none is final. `lender`: where the final gradients
  // are read from when they do not stay in a partition (else nullptr); it outlives the step.
  void start(int64_t numel, HostGradPipeline* lender = nullptr);
  HostGradPipeline* lender() const { return lender_; }
  // Elements [from, numel) are final (a larger `from` than already marked changes nothing).
  void mark_from(int64_t from);
  // The step's gradients will not all arrive (the backward failed): waiters throw `error`.
  void fail(Status error);
  // Blocks until elements [begin, numel) are final. Throws tierzero::Error with the failure, if any.
  void wait_from(int64_t begin);

 private:
  std::mutex mutex_;
  std::condition_variable advanced_;
  int64_t from_ = 0;
  Status error_;
  HostGradPipeline* lender_ = nullptr;
};

}  // namespace tierzero::engine
