// Partition layout of flat groups per ZeRO stage; see "Partitioning" in engine_checkpoint.h.
#include <algorithm>

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::checkpoint {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

uint64_t FlatGroup::numel() const {
  uint64_t n = 0;
  for (const TensorSpec& p : params) n += static_cast<uint64_t>(p.numel());
  return n;
}

bool rank_stores_groups(int zero_stage, uint32_t rank) { return zero_stage != 0 || rank == 0; }

uint64_t stage3_piece_numel(uint64_t numel, uint32_t world_size) { return ceil_div(numel, world_size); }

uint64_t partition_numel(const FlatGroup& group, int zero_stage, uint32_t world_size, uint32_t alignment) {
  if (zero_stage == 0) return group.numel();
  if (zero_stage == 3) {
    uint64_t n = 0;
    for (const TensorSpec& p : group.params) n += stage3_piece_numel(static_cast<uint64_t>(p.numel()), world_size);
    return n;
  }
  const uint64_t unit = uint64_t{alignment} * world_size;
  return ceil_div(group.numel(), unit) * unit / world_size;
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
      const uint64_t piece = stage3_piece_numel(n, world_size);
      const uint64_t begin = std::min(n, piece * rank);
      const uint64_t end = std::min(n, begin + piece);
      if (end > begin) segments.push_back({logical + begin, partition, end - begin});
      logical += n;
      partition += piece;
    }
    return segments;
  }
  const uint64_t per_rank = partition_numel(group, zero_stage, world_size, alignment);
  const uint64_t begin = std::min(total, per_rank * rank);
  const uint64_t end = std::min(total, begin + per_rank);
  if (end > begin) segments.push_back({begin, 0, end - begin});
  return segments;
}

}  // namespace tierzero::checkpoint
