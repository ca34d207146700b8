// ZeRO's partition arithmetic with DeepSpeed's padding rules, the one copy that the engine's
// buffers, tierzero's engine checkpoints and the DeepSpeed import all size themselves by:
//   stages 1-2  a flat group of n elements is zero-padded to a multiple of alignment * W elements
//               (DeepSpeed: alignment 2, its NCCL start alignment, even at W = 1) and split into
//               W equal partitions of P elements; rank r holds padded elements [r*P, (r+1)*P)
//   stage 3     each parameter of n elements is split into W pieces of ceil(n/W) elements, the
//               last ones zero-padded; rank r holds piece r, [r*ceil(n/W), (r+1)*ceil(n/W))
// Pure integer arithmetic: no tensors, no I/O. W (world_size) and alignment are at least 1.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tierzero::partitioning {

// DeepSpeed's stage 1-2 alignment factor: flat groups are padded to a multiple of 2 * W elements.
inline constexpr uint32_t kDeepSpeedAlignment = 2;

// Elements [begin, end) of a whole.
struct Range {
  uint64_t begin = 0;
  uint64_t end = 0;
  constexpr uint64_t size() const { return end - begin; }
};

// Stage 3: the elements of each rank's piece of a parameter of `numel` elements, ceil(numel / W).
constexpr uint64_t stage3_piece_numel(uint64_t numel, uint32_t world_size) {
  return (numel + world_size - 1) / world_size;
}

// Stages 1-2: a flat group of `numel` elements padded to a multiple of alignment * W elements.
constexpr uint64_t padded_flat_numel(uint64_t numel, uint32_t world_size, uint32_t alignment) {
  const uint64_t unit = uint64_t{alignment} * world_size;
  return (numel + unit - 1) / unit * unit;
}

// Stages 1-2: the elements of each rank's partition of a flat group of `numel` elements (padding
// included): padded_flat_numel(...) / W.
constexpr uint64_t flat_partition_numel(uint64_t numel, uint32_t world_size, uint32_t alignment) {
  return padded_flat_numel(numel, world_size, alignment) / world_size;
}

// The real (not padding) elements of a `numel`-element whole that rank `rank` holds when every rank
// holds `share` consecutive elements (a stage 3 piece or a stage 1-2 partition):
// [min(numel, rank * share), min(numel, (rank + 1) * share)); empty past the end.
constexpr Range rank_range(uint64_t numel, uint64_t share, uint32_t rank) {
  const uint64_t begin = std::min(numel, share * rank);
  return {begin, std::min(numel, begin + share)};
}

}  // namespace tierzero::partitioning
