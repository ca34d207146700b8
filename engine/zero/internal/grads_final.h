// How much of this rank's gradient partition is final for the step while its backward still runs.
// With the optimizer stepped inside the backward (zero_engine.h), Adam reads a sub-group only once
// its gradients are final. The backward runs the units last to first and the partition holds their
// parameters first to last, so what is final is a suffix [from, numel) that only grows toward 0.
// One or more writers (the engine's thread, the gradient pipeline's worker), one reader (the
// optimizer's thread). Where the gradients land in a ring of record-sized slots instead of a whole
// partition (host_grad_pipeline.h), the reader takes each final piece's gradients from the ring's
// GradLender and tells it once it has read them for good, so the slot can take the next record.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

#include "common/common.h"
#include "cpu_adam/adam.h"

namespace tierzero::engine {

// Final gradients kept outside a partition (the gradient ring), lent a piece at a time.
class GradLender {
 public:
  virtual ~GradLender() = default;
  // Elements [begin, begin + count) of the gradient (final, within one record); data nullptr when
  // nothing landed there this step (all zero).
  virtual cpu_adam::ConstElements lend(int64_t begin, int64_t count) = 0;
  // [begin, begin + count), lent, has been read for good: once its whole record has, its slot is
  // zeroed and taken by the next record.
  virtual void consumed(int64_t begin, int64_t count) = 0;
};

class GradsFinal {
 public:
  // A step of `numel` gradient elements begins: none is final. `lender`: where the final gradients
  // are read from when they do not stay in a partition (else nullptr); it outlives the step.
  void start(int64_t numel, GradLender* lender = nullptr);
  GradLender* lender() const { return lender_; }
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
  GradLender* lender_ = nullptr;
};

}  // namespace tierzero::engine
