#include "engine/zero/internal/offloaded_grads.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "common/common.h"

namespace tierzero::engine {

void OffloadedGrads::Ranges::insert(int64_t offset, int64_t numel) {
  if (numel > 0) ends_[offset + numel] = offset;
}

std::vector<OffloadedGrads::Ranges::Piece> OffloadedGrads::Ranges::cut(int64_t offset, int64_t numel) const {
  std::vector<Piece> pieces;
  const int64_t end = offset + numel;
  int64_t at = offset;
  for (auto it = ends_.upper_bound(offset); at < end && it != ends_.end() && it->second < end; ++it) {
    if (it->second > at) pieces.push_back({at, it->second - at, false});
    const int64_t held_end = std::min(end, it->first);
    at = std::max(at, it->second);
    pieces.push_back({at, held_end - at, true});
    at = held_end;
  }
  if (at < end) pieces.push_back({at, end - at, false});
  return pieces;
}

OffloadedGrads::OffloadedGrads(HostGradPipeline& pipeline, at::Tensor accumulator)
    : pipeline_(pipeline), accumulator_(std::move(accumulator)) {
  if (accumulator_.defined() && (accumulator_.scalar_type() != at::kFloat || !accumulator_.is_contiguous() ||
                                 accumulator_.numel() != pipeline_.numel()))
    throw Error(internal_error("OffloadedGrads needs a contiguous fp32 accumulator of the partition's " +
                               std::to_string(pipeline_.numel()) + " elements"));
}

void OffloadedGrads::begin_micro_batch(bool last) {
  const bool first = !began_;
  only_window_ = first;
  began_ = true;
  last_micro_batch_ = last;
  if (accumulates_on_device() || lands_final() || zeroed_) return;
  // Host mode adds from now on: every element this window's buckets do not overwrite must be zero.
  if (first)
    pipeline_.zero_partition();
  else
    zero_unlanded();  // after a window that landed final (step() after more micro-batches than configured)
  zeroed_ = true;
}

void OffloadedGrads::zero_unlanded() {
  const at::Tensor partition = pipeline_.partition();
  if (!partition.defined()) return;
  for (const Ranges::Piece& piece : landed_.cut(0, partition.numel()))
    if (!piece.inserted) partition.narrow(0, piece.offset, piece.numel).zero_();
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
  std::vector<LandingRun> fresh, again;
  for (const LandingRun& run : runs)
    for (const Ranges::Piece& piece : landed_.cut(run.partition_offset, run.numel))
      (piece.inserted ? again : fresh)
          .push_back({piece.offset, run.source_offset + (piece.offset - run.partition_offset), piece.numel});
  for (const LandingRun& run : fresh) landed_.insert(run.partition_offset, run.numel);
  if (!again.empty()) pipeline_.land(sum, std::move(again));
  if (!fresh.empty()) pipeline_.land_final(sum, std::move(fresh));
}

void OffloadedGrads::drain() {
  const bool held = accumulated_ && !last_micro_batch_;  // the window ended early: all of it is still here
  if (held) {  // nothing landed before: the window's micro-batches all accumulated on the device
    landed_.insert(0, accumulator_.numel());
    pipeline_.land_final(accumulator_, {{0, 0, accumulator_.numel()}});
  }
  pipeline_.drain();
  if (held) accumulator_.zero_();  // its copies have run
  if (!zeroed_) zero_unlanded();
  zeroed_ = true;
  accumulated_ = false;
}

void OffloadedGrads::reset() {
  landed_.clear();
  zeroed_ = false;
  last_micro_batch_ = false;
  began_ = false;
  only_window_ = false;
  accumulated_ = false;
  pipeline_.reset();
}

}  // namespace tierzero::engine
