// Stages 0-2: every rank keeps all compute parameters in one flat buffer (DeepSpeed's group
// layout, partition_layout.h). Gradients are summed into buckets of reduce_bucket_numel elements
// as backward produces them; a bucket whose parameters have all arrived is reduced at once,
// asynchronously, while backward goes on: stages 0/1 all-reduce it, stage 2 reduces each piece to
// the rank that owns it (DeepSpeed's stage 2 reduction). This rank's piece is then added, averaged
// over ranks, into its gradient partition. After the optimizer step, stages 1/2 all-gather the
// updated partitions.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "engine/zero/internal/partition_layout.h"
#include "engine/zero/internal/partitioner.h"

namespace tierzero::engine {

class FlatPartitioner final : public Partitioner {
 public:
  // See make_partitioner(); options.stage is 0, 1 or 2.
  FlatPartitioner(const FunctionalModel& model, ParamSource& params, const PartitionOptions& options, Comm& comm,
                  OffloadedGrads* landing);

  std::vector<at::Tensor> fetch(size_t unit) override;
  void release(size_t unit) override {}
  void reduce_grads(size_t unit, std::vector<at::Tensor> grads) override;

  int64_t partition_numel() const override { return layout_.partition_numel; }
  bool partitioned() const override { return layout_.partition_count > 1; }
  std::map<std::string, at::Tensor> assemble(const at::Tensor& partition) override;
  std::vector<PartitionRun> locate(const std::string& name, int64_t first, int64_t count) const override;
  void finish_reduction() override;
  at::Tensor grad_partition() override { return grad_partition_; }
  void zero_grads() override { zero_grad_partition(landing_, grad_partition_); }
  at::Tensor compute_partition() override;
  void publish_compute_partition() override;

 private:
  // A contiguous flat range of whole parameters whose gradients are reduced together.
  struct Bucket {
    int64_t begin = 0;
    int64_t end = 0;
    int expected_arrivals = 0;  // (unit, parameter) gradients per micro-batch
    int arrivals = 0;
    bool in_flight = false;  // launched, not yet added to the partition
    bool lands = true;       // landing_->lands_now() at launch
    at::Tensor sum;          // [end - begin] grad dtype, while filling or in flight
    std::vector<CommOp> ops;
  };
  void make_buckets();
  void launch(size_t bucket);
  void complete(size_t bucket);
  // First flat element of this rank's partition (of the only one when not partitioned()).
  int64_t own_begin() const { return layout_.partition_begin(partitioned() ? comm_.rank() : 0); }

  PartitionOptions options_;
  Comm& comm_;
  FlatGroupLayout layout_;
  std::vector<std::vector<size_t>> unit_params_;  // unit -> slot indices
  at::Tensor flat_params_;                        // [padded_numel] compute dtype
  std::vector<at::Tensor> param_views_;           // slot -> view of flat_params_ in its shape
  OffloadedGrads* landing_;                       // offloaded gradients, or null
  at::Tensor grad_partition_;                     // [partition_numel] grad dtype, comm device (or
                                                  // the landing pipeline's fp32 host partition)
  std::vector<Bucket> buckets_;                   // in backward order (highest offsets first)
  std::vector<size_t> bucket_of_slot_;
  std::deque<size_t> in_flight_;
};

}  // namespace tierzero::engine
