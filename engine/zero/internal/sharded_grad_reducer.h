// Stage 3's gradient reduction, as DeepSpeed's stage 3 does it (reduce_independent_p_g_buckets_
// and_remove_grads): parameter gradients are packed, in the order backward hands them over, into
// buckets of at most reduce_bucket_size elements. Parameters are never split: one that does not
// fit launches the open bucket first, and one larger than a bucket goes alone. Each bucket is
// reduce-scattered in one collective, asynchronously, while backward goes on: every parameter's
// gradient is padded to W * shard_numel (its stage 3 layout) and the collective leaves this rank
// its shard of each, which is added, averaged over ranks, into this rank's gradient shard.
// With `landing` (offloaded optimizer), each reduced bucket is handed to it instead
// (offloaded_grads.h), which averages it into the host partition off the backward path, or keeps it
// in a device accumulator until the window's last micro-batch.
// Memory held by unreduced gradients: the open bucket plus at most two launched ones, each about
// reduce_bucket_size elements (or one parameter larger than that); on one rank a bucket is handed on
// as soon as it is launched, and a large parameter's gradient is its own bucket (no copy).
#pragma once

#include <ATen/core/Tensor.h>

#include <deque>
#include <unordered_map>
#include <vector>

#include "engine/comm/comm.h"
#include "engine/zero/internal/offloaded_grads.h"
#include "engine/zero/internal/partition_layout.h"

namespace tierzero::engine {

class ShardedGradReducer {
 public:
  // Reduces into `grad_shard` ([layout.shard_numel], any dtype and device; this object writes
  // into that tensor's storage), or, with `landing` (non-null; its partition is then `grad_shard`),
  // through the offloaded gradients' landing. Buckets live on comm.device() in `grad_dtype`. `layout`,
  // `comm` and `landing` must outlive the reducer.
  ShardedGradReducer(const ShardedLayout& layout, int64_t bucket_numel, at::ScalarType grad_dtype, Comm& comm,
                     at::Tensor grad_shard, OffloadedGrads* landing = nullptr);

  // Adds the gradient of parameter `slot` (layout.slots index; whole, its shape or flat, any float
  // dtype, on comm.device(); undefined means zero) to the open bucket, launching the open bucket
  // first when the parameter does not fit. A parameter already in the open bucket (a tied weight)
  // is summed in place. On one rank a contiguous `grad` of the bucket dtype is taken as it is (no
  // padded copy, and no reduction copy: the bucket is the gradient), so the caller must not write it
  // afterwards; otherwise it may be reused once this returns.
  void add(size_t slot, const at::Tensor& grad);

  // Launches the open bucket and waits for every launched one: the gradient shard then holds them
  // all (with a landing pipeline: once the pipeline is drained). A collective when a bucket is open.
  void finish();

  // Reduce-scatters launched since construction.
  int64_t reduce_scatters() const { return reduce_scatters_; }

 private:
  // The open bucket: per parameter, its padded gradient [W, shard_numel].
  struct Entry {
    size_t slot = 0;
    at::Tensor padded;
  };
  // A launched bucket.
  struct Launched {
    CommOp op;
    std::vector<size_t> slots;  // in column order
    at::Tensor input;           // [W * row], kept alive until op finishes
    at::Tensor output;          // [row]: this rank's shard of every slot, concatenated
    bool lands = true;          // landing_->lands_now() at launch
  };
  void launch();
  void complete(Launched& launched);

  const ShardedLayout& layout_;
  int64_t bucket_numel_;
  at::ScalarType grad_dtype_;
  Comm& comm_;
  at::Tensor grad_shard_;
  OffloadedGrads* landing_;
  std::vector<Entry> open_;
  std::unordered_map<size_t, size_t> entry_of_slot_;  // slot -> index in open_
  int64_t open_numel_ = 0;                            // parameter elements in open_
  std::deque<Launched> launched_;
  int64_t reduce_scatters_ = 0;
};

}  // namespace tierzero::engine
