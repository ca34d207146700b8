// Where every parameter element lives in ZeRO's partitioned flat buffers, with DeepSpeed's padding
// rules, so an engine checkpoint maps 1:1 onto DeepSpeed's fp32 partitions. The sizes come from
// common/internal/partition.h, the one implementation of the rules:
//   stages 1-2: the trainable parameters form one group, flattened in first-use order, the flat
//       buffer padded with zeros to a multiple of 2 * W elements (DeepSpeed's NCCL start
//       alignment, even at W = 1) and split into W equal partitions; rank r owns [r * P, (r + 1) * P).
//   stage 0: the same group, not partitioned: one partition holds the whole, unpadded.
//   stage 3: each parameter of n elements is padded to a multiple of W; rank r owns elements
//       [r * ceil(n / W), (r + 1) * ceil(n / W)) of every parameter; a rank's flat shard is its
//       pieces of every parameter concatenated in order, without further alignment.
// Pure arithmetic: no tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine {

// One parameter inside a stage 0-2 flat group.
struct FlatSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t offset = 0;  // first element in the flat group
};

// A stage 0-2 flat group and its partitions.
struct FlatGroupLayout {
  std::vector<FlatSlot> slots;  // in flat order
  int64_t numel = 0;            // elements of all parameters
  int64_t padded_numel = 0;     // numel rounded up to the alignment; a multiple of partition_count
  int partition_count = 1;
  int64_t partition_numel = 0;  // padded_numel / partition_count

  // First flat element owned by partition `rank`.
  int64_t partition_begin(int rank) const { return rank * partition_numel; }
};

// Lays out `params` (first-use order) as one group for ZeRO stage `stage` (0..2) over `world_size`
// ranks: stage 0 one unpadded partition; stages 1-2 `world_size` partitions of the flat padded to a
// multiple of 2 * world_size elements.
FlatGroupLayout make_flat_group_layout(const std::vector<ParamSpec>& params, int stage, int world_size);

// One parameter of a stage 3 model.
struct ShardSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t shard_numel = 0;   // ceil(numel / W): what each rank holds (padding included)
  int64_t shard_offset = 0;  // where this rank's piece starts in the rank's flat shard
};

// A stage 3 model's per-parameter partitioning.
struct ShardedLayout {
  std::vector<ShardSlot> slots;  // in first-use order
  int world_size = 1;
  int64_t shard_numel = 0;  // one rank's flat shard: the sum of slots' shard_numel
};

// Lays out `params` (first-use order) for stage 3 over `world_size` ranks.
ShardedLayout make_sharded_layout(const std::vector<ParamSpec>& params, int world_size);

// A run of one parameter's elements that one rank's partition holds contiguously.
struct PartitionRun {
  int rank = 0;                  // whose partition holds it (0 when the group is not partitioned)
  int64_t partition_offset = 0;  // its first element in that partition
  int64_t param_offset = 0;      // its first element in the parameter, row-major
  int64_t numel = 0;
  bool operator==(const PartitionRun&) const = default;
};

// The runs that hold elements [first, first + count) of `slot` (the range inside the parameter; for
// a flat group, a slot of `layout`), in increasing param_offset, together exactly that range.
std::vector<PartitionRun> locate(const FlatGroupLayout& layout, const FlatSlot& slot, int64_t first, int64_t count);
std::vector<PartitionRun> locate(const ShardSlot& slot, int64_t first, int64_t count);

// The slot of `slots` (FlatSlot or ShardSlot) named `name`; throws tierzero::Error naming it when
// there is none.
template <class Slot>
const Slot& slot_named(const std::vector<Slot>& slots, const std::string& name) {
  for (const Slot& slot : slots)
    if (slot.name == name) return slot;
  throw Error(invalid_argument("no parameter named '" + name + "' in the partition layout"));
}

}  // namespace tierzero::engine
