#include "engine/zero/partition_layout.h"

#include <algorithm>

namespace tierzero::engine {

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

static int64_t round_up(int64_t n, int64_t multiple) { return (n + multiple - 1) / multiple * multiple; }

FlatGroupLayout make_flat_group_layout(const std::vector<std::string>& names,
                                       const std::vector<std::vector<int64_t>>& shapes,
                                       int partition_count) {
  FlatGroupLayout layout;
  layout.partition_count = partition_count;
  for (size_t i = 0; i < names.size(); ++i) {
    FlatSlot slot{names[i], shapes[i], shape_numel(shapes[i]), layout.numel};
    layout.numel += slot.numel;
    layout.slots.push_back(std::move(slot));
  }
  layout.padded_numel =
      partition_count == 1 ? layout.numel : round_up(layout.numel, 2 * static_cast<int64_t>(partition_count));
  layout.partition_numel = layout.padded_numel / partition_count;
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
    slot.shard_numel = (slot.numel + world_size - 1) / world_size;
    slot.shard_offset = layout.shard_numel;
    layout.shard_numel += slot.shard_numel;
    layout.slots.push_back(std::move(slot));
  }
  return layout;
}

}  // namespace tierzero::engine
