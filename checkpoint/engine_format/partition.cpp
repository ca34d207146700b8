// Partition layout of flat groups per ZeRO stage; see "Partitioning" in engine_checkpoint.h. The
// arithmetic is common/internal/partition.h's.
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "common/common.h"

namespace tierzero::checkpoint {

uint64_t FlatGroup::numel() const {
  uint64_t n = 0;
  for (const TensorSpec& p : params) n += static_cast<uint64_t>(p.numel());
  return n;
}

bool rank_stores_groups(int zero_stage, uint32_t rank) { return zero_stage != 0 || rank == 0; }

uint64_t partition_numel(const FlatGroup& group, int zero_stage, uint32_t world_size, uint32_t alignment) {
  if (zero_stage == 0) return group.numel();
  if (zero_stage == 3) {
    uint64_t n = 0;
    for (const TensorSpec& p : group.params) {
      n += partitioning::stage3_piece_numel(static_cast<uint64_t>(p.numel()), world_size);
    }
    return n;
  }
  return partitioning::flat_partition_numel(group.numel(), world_size, alignment);
}

std::vector<PartitionSegment> partition_segments(const FlatGroup& group, int zero_stage, uint32_t world_size,
                                                 uint32_t alignment, uint32_t rank) {
  std::vector<PartitionSegment> segments;
  const uint64_t total = group.numel();
  if (zero_stage == 0) {
    if (total > 0) segments.push_back({0, 0, total});
    return segments;
  }
  if (zero_stage == 3) {
    uint64_t logical = 0;
    uint64_t partition = 0;
    for (const TensorSpec& p : group.params) {
      const auto n = static_cast<uint64_t>(p.numel());
      const uint64_t piece = partitioning::stage3_piece_numel(n, world_size);
      const partitioning::Range held = partitioning::rank_range(n, piece, rank);
      if (held.size() > 0) segments.push_back({logical + held.begin, partition, held.size()});
      logical += n;
      partition += piece;
    }
    return segments;
  }
  const uint64_t per_rank = partitioning::flat_partition_numel(total, world_size, alignment);
  const partitioning::Range held = partitioning::rank_range(total, per_rank, rank);
  if (held.size() > 0) segments.push_back({held.begin, 0, held.size()});
  return segments;
}

}  // namespace tierzero::checkpoint
