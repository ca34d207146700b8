// The engine's flat and sharded layouts, sized by checkpoint/'s partition rules so the two can never
// disagree (checkpoint/partition.cpp holds the only copy of DeepSpeed's padding arithmetic).
#include "engine/zero/partition_layout.h"

#include <algorithm>

#include "checkpoint/engine_checkpoint.h"

namespace tierzero::engine {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

FlatGroupLayout make_flat_group_layout(const std::vector<std::string>& names,
                                       const std::vector<std::vector<int64_t>>& shapes, int stage,
                                       int world_size) {
  FlatGroupLayout layout;
  layout.partition_count = stage == 0 ? 1 : world_size;
  checkpoint::FlatGroup group;
  for (size_t i = 0; i < names.size(); ++i) {
    FlatSlot slot{names[i], shapes[i], shape_numel(shapes[i]), layout.numel};
    layout.numel += slot.numel;
    layout.slots.push_back(std::move(slot));
    group.params.push_back({names[i], shapes[i]});
  }
  layout.partition_numel = static_cast<int64_t>(checkpoint::partition_numel(
      group, stage, static_cast<uint32_t>(world_size), checkpoint::kDeepSpeedAlignment));
  layout.padded_numel = layout.partition_numel * layout.partition_count;
  return layout;
}

int64_t ShardedLayout::valid_numel(const ShardSlot& slot, int rank) const {
  int64_t begin = rank * slot.shard_numel;
  return std::clamp<int64_t>(slot.numel - begin, 0, slot.shard_numel);
}

ShardedLayout make_sharded_layout(const std::vector<std::string>& names,
                                  const std::vector<std::vector<int64_t>>& shapes, int world_size) {
  ShardedLayout layout;
  layout.world_size = world_size;
  for (size_t i = 0; i < names.size(); ++i) {
    ShardSlot slot;
    slot.name = names[i];
    slot.shape = shapes[i];
    slot.numel = shape_numel(shapes[i]);
    slot.shard_numel = static_cast<int64_t>(
        checkpoint::stage3_piece_numel(static_cast<uint64_t>(slot.numel), static_cast<uint32_t>(world_size)));
    slot.shard_offset = layout.shard_numel;
    layout.shard_numel += slot.shard_numel;
    layout.slots.push_back(std::move(slot));
  }
  return layout;
}

}  // namespace tierzero::engine
