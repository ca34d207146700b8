// Stage 3: each rank keeps only its shard of every parameter (partition_layout.h). fetch(unit)
// all-gathers the unit's parameters in one collective (or takes a gather issued ahead of time),
// release(unit) drops them. The first step records the order of fetches; later steps replay it,
// gathering up to prefetch_numel elements ahead while the current unit computes. Parameters of at
// most persistence_threshold elements stay gathered on every rank (re-gathered after each step).
// Gradients are reduce-scattered per unit as backward produces them and added, averaged over
// ranks, into this rank's gradient shard.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "engine/zero/partition_layout.h"
#include "engine/zero/partitioner.h"

namespace tierzero::engine {

class ShardedPartitioner final : public Partitioner {
 public:
  // See make_partitioner(); options.stage is 3.
  ShardedPartitioner(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params,
                     const PartitionOptions& options, Comm& comm);

  std::vector<at::Tensor> fetch(size_t unit) override;
  void release(size_t unit) override;
  void reduce_grads(size_t unit, std::vector<at::Tensor> grads) override;

  int64_t partition_numel() const override { return layout_.shard_numel; }
  bool partitioned() const override { return layout_.world_size > 1; }
  at::Tensor partition_of(const std::map<std::string, at::Tensor>& full, at::Device device) const override;
  std::map<std::string, at::Tensor> assemble(const at::Tensor& partition) override;
  void finish_reduction() override;
  at::Tensor grad_partition() override { return grad_shard_; }
  void zero_grads() override { grad_shard_.zero_(); }
  at::Tensor compute_partition() override { return shard_params_; }
  void publish_compute_partition() override;

  const ShardedLayout& layout() const { return layout_; }
  // Elements of gathered (non-persistent) parameters alive now, prefetched ones included.
  int64_t live_gathered_numel() const { return live_gathered_numel_; }

 private:
  // An all-gather of one unit's non-persistent parameters, issued or finished.
  struct Gather {
    CommOp op;
    at::Tensor gathered;  // [W * shard sum] compute dtype
    int64_t numel = 0;    // W * shard sum, for the live count
  };
  // A reduce-scatter of one unit's gradients in flight.
  struct Reduction {
    size_t unit = 0;
    CommOp op;
    at::Tensor input;   // [W * shard sum], kept alive until the op finishes
    at::Tensor output;  // [shard sum]
  };
  Gather start_gather(size_t unit);
  void prefetch_after(size_t trace_position);
  void complete(Reduction& reduction);
  // Column of each of the unit's slots in its [W, shard sum] exchange layout; `persistent`
  // selects whether persistent slots are included.
  std::vector<int64_t> columns(const std::vector<size_t>& slots, int64_t* total) const;
  std::vector<size_t> gathered_slots(size_t unit) const;

  PartitionOptions options_;
  Comm& comm_;
  ShardedLayout layout_;
  std::vector<std::vector<size_t>> unit_params_;  // unit -> slot indices
  std::vector<bool> persistent_;                  // slot -> kept whole on every rank
  std::vector<at::Tensor> persistent_params_;     // slot -> whole parameter (persistent slots)
  at::Tensor shard_params_;                       // [shard_numel] compute dtype: this rank's shards
  at::Tensor grad_shard_;                         // [shard_numel] grad dtype, grad device
  std::vector<std::deque<Gather>> ready_;         // unit -> gathers issued ahead, oldest first
  std::vector<std::vector<at::Tensor>> in_use_;   // unit -> parameters handed out by fetch
  std::deque<Reduction> reductions_;
  int64_t live_gathered_numel_ = 0;
  // The fetch order of the first step, and where the current step is in it.
  std::vector<size_t> trace_;
  bool recording_ = true;
  size_t trace_cursor_ = 0;
  size_t prefetch_cursor_ = 0;  // trace positions below this have had their gather issued
};

}  // namespace tierzero::engine
