// The engine's flat and sharded layouts, sized by common/internal/partition.h, the one copy of DeepSpeed's
// padding arithmetic that engine checkpoints and the DeepSpeed import use too.
#include "engine/zero/internal/partition_layout.h"

#include <c10/util/accumulate.h>

#include <algorithm>

#include "common/common.h"

namespace tierzero::engine {

FlatGroupLayout make_flat_group_layout(const std::vector<ParamSpec>& params, int stage, int world_size) {
  FlatGroupLayout layout;
  layout.partition_count = stage == 0 ? 1 : world_size;
  for (const ParamSpec& spec : params) {
    FlatSlot slot{spec.name, spec.shape, c10::multiply_integers(spec.shape), layout.numel};
    layout.numel += slot.numel;
    layout.slots.push_back(std::move(slot));
  }
  layout.partition_numel = stage == 0 ? layout.numel
                                      : static_cast<int64_t>(partitioning::flat_partition_numel(
                                            static_cast<uint64_t>(layout.numel), static_cast<uint32_t>(world_size),
                                            partitioning::kDeepSpeedAlignment));
  layout.padded_numel = layout.partition_numel * layout.partition_count;
  return layout;
}

ShardedLayout make_sharded_layout(const std::vector<ParamSpec>& params, int world_size) {
  ShardedLayout layout;
  layout.world_size = world_size;
  for (const ParamSpec& spec : params) {
    ShardSlot slot{spec.name, spec.shape, c10::multiply_integers(spec.shape)};
    slot.shard_numel = static_cast<int64_t>(
        partitioning::stage3_piece_numel(static_cast<uint64_t>(slot.numel), static_cast<uint32_t>(world_size)));
    slot.shard_offset = layout.shard_numel;
    layout.shard_numel += slot.shard_numel;
    layout.slots.push_back(std::move(slot));
  }
  return layout;
}

namespace {

// Splits elements [first, first + count) of a parameter into runs of `run_numel`-element blocks:
// block b is held by rank b at partition offset `offset_in_rank + (element - b * run_numel)`, where
// `element_base` is the parameter's first element in block coordinates.
std::vector<PartitionRun> split_into_blocks(int64_t element_base, int64_t run_numel, int64_t offset_in_rank,
                                            int64_t first, int64_t count) {
  std::vector<PartitionRun> runs;
  for (int64_t done = 0; done < count;) {
    const int64_t position = element_base + first + done;
    const int64_t block = position / run_numel;
    const int64_t within = position - block * run_numel;
    const int64_t numel = std::min(count - done, run_numel - within);
    runs.push_back({static_cast<int>(block), offset_in_rank + within, first + done, numel});
    done += numel;
  }
  return runs;
}

}  // namespace

// Flat: the group's element slot.offset + e lies in partition (slot.offset + e) / partition_numel.
std::vector<PartitionRun> locate(const FlatGroupLayout& layout, const FlatSlot& slot, int64_t first, int64_t count) {
  return split_into_blocks(slot.offset, layout.partition_numel, 0, first, count);
}

// Sharded: element e of the parameter lies in rank e / shard_numel, at the rank's slot.shard_offset
// plus e % shard_numel.
std::vector<PartitionRun> locate(const ShardSlot& slot, int64_t first, int64_t count) {
  return split_into_blocks(0, slot.shard_numel, slot.shard_offset, first, count);
}

}  // namespace tierzero::engine
