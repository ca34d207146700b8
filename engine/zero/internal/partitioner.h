// ZeRO's partitioner: owns the 16-bit compute parameters and this rank's gradient partition, and
// moves them between ranks. Two implementations share this interface:
//   FlatPartitioner (stages 0-2): parameters resident in one flat buffer; gradients reduced in
//       buckets of reduce_bucket_numel as backward produces them (stages 0/1: all-reduce; stage 2:
//       each piece of a bucket reduced to the rank owning it, as DeepSpeed's stage 2 average_tensor
//       does with one async dist.reduce per (owner, range)) and accumulated into this rank's
//       partition. Why not a reduce-scatter: a bucket much smaller than a partition overlaps only
//       1-2 partitions, but a reduce-scatter needs W equal chunks, so its input would be W times the
//       bucket, mostly zeros, and each rank would send ~W times more than a reduce to the owner does.
//   ShardedPartitioner (stage 3): each rank keeps its shard of every parameter; a unit's
//       parameters are all-gathered before use and released after (unless reused within
//       max_reuse_distance), prefetched along the order the first step recorded, never more than
//       max_live_numel elements whole at once; gradients are reduce-scattered in buckets of
//       reduce_bucket_numel elements (sharded_partitioner.h, sharded_grad_reducer.h).
// The optimizer sees only flat tensors of this rank's partition (partition_numel() elements):
// the gradient (grad_partition) and the compute parameters it writes back to (compute_partition).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/comm.h"
#include "engine/model/functional_model.h"
#include "engine/zero/internal/nvme_params.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/offloaded_grads.h"
#include "engine/zero/internal/param_gateway.h"
#include "engine/zero/internal/partition_layout.h"
#include "engine/zero/internal/step_progress.h"

namespace tierzero::engine {

// How parameters and gradients are kept and reduced.
struct PartitionOptions {
  int stage = 0;                               // 0..3
  at::ScalarType compute_dtype = at::kFloat;   // parameters the model runs with
  at::ScalarType grad_dtype = at::kFloat;      // gradient accumulation and reduction
  bool offload_params = false;                 // stage 3: this rank's shard of the compute
                                               // parameters in host memory, copied to the
                                               // device for each gather (offload_param "cpu")
  bool pin_offloaded_params = true;            // that shard in the engine's pinned host tier
                                               // (asynchronous copies; offload_param.pin_memory),
                                               // else in pageable memory
  int64_t reduce_bucket_numel = 500'000'000;   // elements per gradient reduction bucket
  int64_t prefetch_numel = 50'000'000;         // stage 3: elements gathered ahead of use
  int64_t persistence_threshold = 100'000;     // stage 3: params this small stay gathered
  int64_t max_live_numel = 1'000'000'000;      // stage 3: gathered elements alive at once, at most
  int64_t max_reuse_distance = 1'000'000'000;  // stage 3: keep a param gathered when reused within
                                               // this many elements of other units' params
};

class Partitioner : public ParamGateway {
 public:
  // Elements of this rank's partition (padding included).
  virtual int64_t partition_numel() const = 0;
  // True when ranks hold different partitions (stages 1-3), so a norm needs a sum over ranks.
  virtual bool partitioned() const = 0;

  // The whole parameters (fp32, CPU) assembled from every rank's `partition` (fp32, laid out as
  // locate() says). A collective: every rank calls it.
  virtual std::map<std::string, at::Tensor> assemble(const at::Tensor& partition) = 0;
  // Where elements [first, first + count) of parameter `name` (a parameter of the model; the range
  // inside it) lie in the ranks' partitions (rank 0 when not partitioned()). Pure arithmetic, the
  // same on every rank. Throws tierzero::Error for an unknown name.
  virtual std::vector<PartitionRun> locate(const std::string& name, int64_t first, int64_t count) const = 0;

  // Waits until every gradient reduction started in backward has landed in grad_partition().
  virtual void finish_reduction() = 0;
  // This rank's accumulated gradient partition, averaged over ranks (grad dtype on the comm device,
  // or the offloaded gradients' host partition).
  virtual at::Tensor grad_partition() = 0;
  // Zeroes the gradient partition for the next step.
  virtual void zero_grads() = 0;

  // This rank's partition of the compute parameters (compute dtype; on the compute device, or in
  // host memory with offload_params), for the optimizer to write updated values into. With
  // offloaded parameters it first waits until the device has read every piece copied from it for a
  // gather, so the caller may overwrite them. Undefined when the parameters are on NVMe (the
  // optimizer writes through NvmeParams::lend / send; every read from there has landed first).
  virtual at::Tensor compute_partition() = 0;
  // Makes every rank's updated compute partition visible in the parameters fetch() returns
  // (stages 1-3: an all-gather). A collective.
  virtual void publish_compute_partition() = 0;

  // Orders later reads of the compute partition after `writes` (the optimizer's copies into it,
  // queued on a side stream), each just before the first read that overlaps it: a unit's fetch or
  // gather waits only for the sub-groups holding its parameters. compute_partition() orders after
  // all of them.
  void defer_reads(std::vector<PartitionWrite> writes) { pending_writes_.add(std::move(writes)); }

  // Whether hand_over_grads() is available: one rank, stage 3, gradients landing in an offloaded
  // optimizer's host partition. It lets the optimizer step inside the backward.
  virtual bool can_hand_over_grads() const { return false; }
  // Launches the open gradient bucket and hands every launched bucket on to the host partition's
  // landing, without waiting for the landing: after it, every gradient given to reduce_grads() so far
  // is in the landing's queue. Only when can_hand_over_grads().
  virtual void hand_over_grads() {}

  // Ends a forward-only pass run between steps (an evaluation: engine/zero/zero_engine.h, "Evaluation") without
  // ending the step, so the next pass starts clean. Nothing to do where every parameter is whole
  // (stages 0-2); stage 3 drops what it gathered (ShardedPartitioner). Every unit must be released.
  virtual void end_forward_pass() {}

  // Whether the partitioner can read the compute partition while an optimizer step still writes it
  // (follow_step): stage 3, whose reads are per-unit gathers.
  virtual bool can_follow_step() const { return false; }
  // The optimizer writes the compute partition on another thread, announcing each finished prefix
  // in `progress` (outlives this step's reads): until the next step starts, every read first waits
  // until its elements are final (and orders after their copies), and publish_compute_partition()
  // defers what it would read now to the units that read it. Only when can_follow_step(); null
  // stops following.
  void follow_step(StepProgress* progress) { progress_ = progress; }

 protected:
  // Waits until the step being followed (if any) has written elements [0, end) of the compute
  // partition, and defers reads after the copies it queued for them. Every read waits, prefetches
  // included: a read that skipped ahead when the step was behind would make the ranks' gathers
  // (collectives) differ with the timing.
  void await_written(int64_t end) {
    if (progress_ != nullptr) pending_writes_.add(progress_->wait_for(end));
  }

  // Every rank's `partition` as fp32, concatenated in rank order on the host: an all-gather when
  // partitioned(), else this rank's own. What assemble() slices the parameters from.
  at::Tensor gather_fp32_to_host(const at::Tensor& partition, Comm& comm) const;

  PendingWrites pending_writes_;
  StepProgress* progress_ = nullptr;
};

// Every rank's `mine` (same size on each) concatenated in rank order: an all-gather on comm.device(),
// waited for; `mine` itself on one rank. A collective.
at::Tensor gather_from_ranks(Comm& comm, at::Tensor mine);

// Gradient buckets launched and not yet added to the partition (both partitioners), so their
// collectives overlap backward; bounds the memory backward holds. One rank has no collective to wait
// for: its buckets are added (or landed) at once.
inline size_t max_buckets_in_flight(int world_size) { return world_size > 1 ? 2 : 0; }

// The gradient partition of `numel` elements: `landing`'s host partition when offloaded, else zeros
// in options.grad_dtype on comm.device().
at::Tensor make_grad_partition(OffloadedGrads* landing, int64_t numel, const PartitionOptions& options, Comm& comm);
// Zeroes the gradient partition `grads` for the next step (through `landing` when not null).
void zero_grad_partition(OffloadedGrads* landing, at::Tensor& grads);

// Host memory of an offloaded step, given to the partitioner by the engine (any may be null):
// `grads` lands the gradient partition in host memory (offloaded optimizer; its partition is the
// gradient partition); `tier` holds the offloaded parameter shard
// (offload_params) as its buffer "parameter shard"; `copies` (needed with offload_params) moves the
// shard's pieces to the device for a gather on its side stream, so prefetches do not hold up the compute stream;
// `nvme_params` homes the shard on NVMe instead (offload_param "nvme"; stage 3, with `copies`): its
// initial weights are written there, gathers read their pieces from there, and the optimizer sends
// the new weights there (compute_partition() is then undefined). `shard_from_master`: the stage 3
// shard (in host memory, no `nvme_params`) is the high half of a compact master, which the
// optimizer's first split writes whole: the partitioner leaves it zero instead of reading the
// weights into it a first time; publish_compute_partition() after that split gathers its
// persistent parameters from it.
struct OffloadedHost {
  OffloadedGrads* grads = nullptr;
  HostTier* tier = nullptr;
  DeviceCopies* copies = nullptr;
  NvmeParams* nvme_params = nullptr;
  bool shard_from_master = false;
};

// Builds the partitioner for `options.stage` over `model`'s parameters (all_params order), its
// compute parameters on comm.device() read from `params` (every name of the model, checked by
// check_params; only what this rank keeps is read: param_loading.h). `host` must outlive the
// partitioner.
std::unique_ptr<Partitioner> make_partitioner(const FunctionalModel& model, ParamSource& params,
                                              const PartitionOptions& options, Comm& comm, OffloadedHost host = {});

}  // namespace tierzero::engine

namespace tierzero::engine {

// For every unit of `model`, the index in all_params(model) of each of its parameters, in
// unit_params order (a tied weight appears in two units with one index).
std::vector<std::vector<size_t>> unit_param_indices(const FunctionalModel& model);

}  // namespace tierzero::engine
