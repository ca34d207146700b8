#include "engine/zero/internal/offloaded_grads.h"

#include <ATen/ATen.h>

#include "common/common.h"

namespace tierzero::engine {

bool OffloadedGrads::Ranges::overlaps(int64_t offset, int64_t numel) const {
  auto it = ends_.upper_bound(offset);  // the first range ending after offset
  return it != ends_.end() && it->second < offset + numel;
}

void OffloadedGrads::Ranges::insert(int64_t offset, int64_t numel) {
  if (numel > 0) ends_[offset + numel] = offset;
}

OffloadedGrads::OffloadedGrads(HostGradPipeline& pipeline, at::Tensor accumulator)
    : pipeline_(pipeline), accumulator_(std::move(accumulator)) {
  if (accumulator_.defined() && (accumulator_.scalar_type() != at::kFloat || !accumulator_.is_contiguous() ||
                                 accumulator_.numel() != pipeline_.numel()))
    throw Error(internal_error("OffloadedGrads needs a contiguous fp32 accumulator of the partition's " +
                               std::to_string(pipeline_.numel()) + " elements"));
}

void OffloadedGrads::begin_micro_batch(bool last) {
  only_window_ = !began_;
  began_ = true;
  last_micro_batch_ = last;
}

void OffloadedGrads::take(const at::Tensor& source, std::vector<LandingRun> runs, bool lands) {
  if (!accumulates_on_device() && !lands_final()) {
    pipeline_.land(source, std::move(runs));
    return;
  }
  if (!lands) {
    for (const LandingRun& run : runs)
      accumulator_.narrow(0, run.partition_offset, run.numel).add_(source.narrow(0, run.source_offset, run.numel));
    accumulated_ = accumulated_ || !runs.empty();
    return;
  }
  // The bucket in fp32 (device mode: plus what earlier micro-batches left for its runs, which then
  // hold nothing).
  at::Tensor sum = source.to(at::kFloat, /*non_blocking=*/false, /*copy=*/accumulates_on_device());
  if (accumulates_on_device())
    for (const LandingRun& run : runs) {
      at::Tensor held = accumulator_.narrow(0, run.partition_offset, run.numel);
      sum.narrow(0, run.source_offset, run.numel).add_(held);
      held.zero_();
    }
  // A range that already landed this window (a parameter used twice, as tied embeddings in stage
  // 3: two reduced buckets per micro-batch) is added to, not overwritten.
  bool again = false;
  for (const LandingRun& run : runs) again = again || landed_.overlaps(run.partition_offset, run.numel);
  if (again) {
    pipeline_.land(sum, std::move(runs));
    return;
  }
  for (const LandingRun& run : runs) landed_.insert(run.partition_offset, run.numel);
  pipeline_.land_final(sum, std::move(runs));
}

void OffloadedGrads::drain() {
  const bool held = accumulated_ && !last_micro_batch_;  // the window ended early: all of it is still here
  if (held) pipeline_.land_final(accumulator_, {{0, 0, accumulator_.numel()}});
  pipeline_.drain();
  if (held) accumulator_.zero_();  // its copies have run
  accumulated_ = false;
}

void OffloadedGrads::reset() {
  landed_.clear();
  last_micro_batch_ = false;
  began_ = false;
  only_window_ = false;
  accumulated_ = false;
  pipeline_.reset();
}

}  // namespace tierzero::engine
