// Stage 3: each rank keeps only its shard of every parameter (partition_layout.h); whole
// parameters exist only around their use, with DeepSpeed's stage 3 knobs (PartitionOptions):
//   fetch(unit) all-gathers, in one collective, the unit's parameters that are not already whole
//       or on their way. The first step records the order of fetches (the trace); later steps
//       follow it and, while the current unit computes, gather the next units' parameters ahead,
//       up to prefetch_numel elements in flight (stage3_prefetch_bucket_size).
//   release(unit) frees each of the unit's parameters unless the trace uses it again within
//       max_reuse_distance elements (stage3_max_reuse_distance: the elements of all parameters of
//       the units in between, each use counted, as DeepSpeed's __params_to_release counts them;
//       0 never keeps) or the prefetcher already passed that next use while it was whole.
//   Whole non-persistent parameters alive at once (in flight, in use or kept) never exceed
//       max_live_numel elements (stage3_max_live_parameters): a prefetch that would pass it first
//       frees kept parameters used later than the prefetched unit, else stops; a fetch that would
//       pass it frees kept parameters (farthest next use first), then gathers issued ahead.
//       Only parameters in use can pass it: a unit whose own parameters exceed the limit, or units
//       fetched at once. (DeepSpeed only caps its prefetch by the limit; parameters kept for reuse
//       may pass it there.)
//   Parameters of at most persistence_threshold elements stay whole on every rank (re-gathered
//       after each step) and are not counted.
//   With the shard on NVMe (OffloadedHost::nvme_params), a gather first reads its pieces into the
//       pinned read buffers and lands them (copies to the device, then the all-gather) later: at its
//       unpack, when the buffers are needed again, or (one rank) at any fetch once they arrived.
//       Each of these follows from the sequence of calls, so the ranks' collectives stay in step.
// Off the trace (a unit out of the recorded order) nothing is prefetched or kept until the next
// step. Every decision follows from the trace and the sequence of calls, never from timing, so
// every rank issues the same collectives in the same order. Gradients: sharded_grad_reducer.h.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/zero/internal/partition_layout.h"
#include "engine/zero/internal/partitioner.h"
#include "engine/zero/internal/sharded_grad_reducer.h"

namespace tierzero::engine {

class ShardedPartitioner final : public Partitioner {
 public:
  // See make_partitioner(); options.stage is 3.
  ShardedPartitioner(const FunctionalModel& model, ParamSource& params, const PartitionOptions& options, Comm& comm,
                     OffloadedHost host = {});

  std::vector<at::Tensor> fetch(size_t unit) override;
  void release(size_t unit) override;
  void reduce_grads(size_t unit, std::vector<at::Tensor> grads) override;

  int64_t partition_numel() const override { return layout_.shard_numel; }
  bool partitioned() const override { return layout_.world_size > 1; }
  std::map<std::string, at::Tensor> assemble(const at::Tensor& partition) override;
  std::vector<PartitionRun> locate(const std::string& name, int64_t first, int64_t count) const override;
  void finish_reduction() override;
  at::Tensor grad_partition() override { return grad_shard_; }
  void zero_grads() override { zero_grad_partition(host_.grads, grad_shard_); }
  at::Tensor compute_partition() override;
  // Also ends the step: drops every gathered parameter (they hold the old values) and, after the
  // first step, stops recording the trace. Following a step (follow_step), the persistent
  // parameters are regathered by the first fetch of each unit that uses them, not here.
  void publish_compute_partition() override;
  // Ends a forward-only pass run between steps (an evaluation: engine/zero/zero_engine.h, "Evaluation") without
  // ending the step: drops every gathered parameter and starts the trace over, so the pass leaves
  // nothing whole and the next pass (evaluation or training) follows the trace from its start. The
  // compute partition and the persistent parameters are untouched. Every unit must be released.
  void end_forward_pass() override;
  bool can_follow_step() const override { return true; }
  bool can_hand_over_grads() const override { return layout_.world_size == 1 && host_.grads != nullptr; }
  void hand_over_grads() override { reducer_.finish(); }

  const ShardedLayout& layout() const { return layout_; }

  // Counters since construction, for tests and logs. Elements are parameter elements (numel, not
  // padding), of non-persistent parameters only.
  struct Stats {
    int64_t live_numel = 0;       // whole now: in flight, in use or kept
    int64_t peak_live_numel = 0;  // the most live_numel has been
    int64_t all_gathers = 0;      // parameter all-gathers issued by fetch and prefetch
    int64_t reduce_scatters = 0;  // gradient buckets reduce-scattered
  };
  Stats stats() const;
  // Times parameter `slot` (layout().slots index) has been all-gathered; 0 for a persistent one.
  int64_t gathers_of(size_t slot) const { return slots_[slot].gathers; }

 private:
  enum class Residency { kSharded, kGathering, kWhole };
  // A non-persistent parameter's state.
  struct SlotState {
    Residency residency = Residency::kSharded;
    uint64_t gather = 0;  // kGathering: the id of the Gather bringing it
    at::Tensor whole;     // kWhole: the parameter, compute dtype, its shape
    int users = 0;        // fetches not yet released
    // Trace position + 1 of the latest use the prefetcher has passed this step (0: none).
    size_t prefetched_use = 0;
    int64_t gathers = 0;
  };
  // An all-gather of some parameters, issued and not yet unpacked.
  struct Gather {
    uint64_t id = 0;
    CommOp op;                        // none with one rank: `gathered` is this rank's pieces
    at::Tensor gathered;              // [W * row] compute dtype; row = the slots' shard_numel summed
    std::vector<size_t> slots;        // in column order
    std::shared_ptr<CopyDone> input;  // the pieces' side-stream copies from an offloaded shard, or null
    at::Tensor mine;                  // with `read`: the device row the read lands in
    std::optional<ParamRead> read;    // the pieces' NVMe read, not yet landed (op not yet issued)
  };
  // This rank's pieces of some slots on the comm device, and their copies when on a side stream.
  struct GatherInput {
    at::Tensor mine;
    std::shared_ptr<CopyDone> copied;
  };
  static constexpr size_t kNone = static_cast<size_t>(-1);

  // Frees every gathered parameter (issued gathers landed first), forgets what the prefetcher
  // passed and puts the trace's cursors back to its start; publish_compute_partition() and
  // end_forward_pass() both end a pass with it.
  void drop_whole_params();

  // The unit's non-persistent parameters that are neither whole nor on their way, each once.
  std::vector<size_t> missing_slots(size_t unit) const;
  int64_t numel_of(const std::vector<size_t>& slots) const;
  // An uninitialized row on the comm device, in the compute dtype, for this rank's pieces of `slots`.
  at::Tensor empty_row(const std::vector<size_t>& slots) const;
  bool uses(size_t unit, size_t slot) const;
  // This rank's pieces of `slots`, concatenated on the comm device: a copy, since the optimizer may
  // rewrite the shard under a stale prefetch (from an offloaded shard, host_.copies' copies on the
  // side stream).
  GatherInput gather_input(const std::vector<size_t>& slots);
  // Waits until the step being followed has written `slots`' shard elements, and orders the reads
  // that follow after its writes into them.
  void order_reads(const std::vector<size_t>& slots);
  void start_gather(const std::vector<size_t>& slots);
  // Issues gather `gather`'s all-gather of gather.mine into gather.gathered (more than one rank),
  // after the input's side-stream copies when there are any.
  void issue_all_gather(Gather& gather);
  void unpack(uint64_t gather_id);
  // NVMe: reads shard `ranges` into `dst` (device, their elements in order) now, through the read
  // buffers a batch at a time; returns the last copy.
  std::shared_ptr<CopyDone> read_now(const std::vector<std::pair<int64_t, int64_t>>& ranges, const at::Tensor& dst);
  // NVMe: lands the read of the gather tagged `tag` (a gather id), if it is still unlanded.
  void land(uint64_t tag);
  void land(Gather& gather);
  // NVMe, one rank: lands the oldest gathers whose reads have arrived.
  void land_arrived();

  // Drops a whole or gathering parameter's gathered copy (a gathering one's op must be done).
  void free_slot(size_t slot);
  // The trace position this fetch of `unit` takes; kNone while recording or off the trace.
  size_t advance_trace(size_t unit);
  // Trace position of the next use of `slot` not yet fetched this step; kNone when none is known.
  size_t next_use(size_t slot) const;
  // Whether `slot`, released by the use at trace `position`, stays whole.
  bool keep_after(size_t slot, size_t position) const;
  void prefetch_after(size_t position);
  // Frees kept parameters not used by `unit` whose next use is after `horizon` (a trace position,
  // or kNone for any), farthest first, until `numel` more elements fit under max_live_numel.
  // Returns whether they fit.
  bool free_kept(int64_t numel, size_t unit, size_t horizon);
  // Waits for gathers issued ahead, newest first, and frees their parameters that `unit` does not
  // use, until `numel` more elements fit.
  void drop_prefetches(int64_t numel, size_t unit);
  // Builds the per-slot indexes of the recorded trace.
  void index_trace();
  // Copies the updated values of persistent `slots` into their whole parameters (a gather).
  void regather_persistent(const std::vector<size_t>& slots);
  // Regathers the persistent parameters of `unit` still holding the last step's values (when
  // publish_compute_partition() deferred them to their first fetch).
  void refresh_persistent(size_t unit);
  // One past the last shard element of `slots`.
  int64_t shard_end(const std::vector<size_t>& slots) const;

  PartitionOptions options_;
  Comm& comm_;
  ShardedLayout layout_;
  std::vector<std::vector<size_t>> unit_params_;  // unit -> slot indices
  std::vector<bool> persistent_;                  // slot -> kept whole on every rank
  std::vector<at::Tensor> persistent_params_;     // slot -> whole parameter (persistent slots)
  std::vector<bool> stale_persistent_;            // slot -> holds the last step's values (following a step)
  at::Tensor shard_params_;                       // [shard_numel] compute dtype: this rank's shards
                                                  // (comm device, or host memory when offloaded)
  OffloadedHost host_;
  NvmeParams* nvme_ = nullptr;       // the shard's home when on NVMe (shard_params_ undefined)
  at::Tensor grad_shard_;            // [shard_numel] grad dtype, comm device (or the
                                     // landing pipeline's fp32 host partition)
  ShardedGradReducer reducer_;
  std::vector<SlotState> slots_;
  std::deque<Gather> gathers_;  // oldest first
  uint64_t next_gather_id_ = 1;
  int64_t live_numel_ = 0;
  int64_t peak_live_numel_ = 0;
  int64_t all_gathers_ = 0;

  // The fetch order of the first step and its indexes.
  std::vector<size_t> trace_;
  std::vector<std::vector<size_t>> uses_;  // slot -> trace positions of the units using it
  std::vector<int64_t> numel_before_;      // position -> elements of the units at earlier positions
  std::vector<int64_t> prefetched_numel_;  // position -> elements gathered ahead for it this step
  bool recording_ = true;
  bool following_ = false;                // this step's fetches have matched the trace so far
  size_t cursor_ = 0;                     // the next trace position expected
  size_t prefetch_cursor_ = 0;            // positions below this have been prefetched
  std::vector<size_t> position_of_unit_;  // unit -> trace position of its open fetch, or kNone
};

}  // namespace tierzero::engine
