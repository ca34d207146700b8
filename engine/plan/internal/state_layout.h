// The offloaded optimizer's state layout in bytes: what one sub-group's record holds, how many
// records stay in pinned memory (tierzero.optimizer_records_in_memory) and what a step moves to and
// from NVMe, as the planner predicts them. The engine sizes its pinned buffers and swap files with
// its own code (engine/zero's nvme_record_bytes, HostTier::capacity for "auto"), which these formulas
// mirror; the 7.6B and 14.8B runs on the GPU box matched them to the byte (pinned 60.91 / 112.34 GiB,
// 72 of 74 records, benchmarks/RESULTS.md). Making both call one function is still to do.
//
// A record (one sub-group of sub_group_size elements, the last one possibly shorter) holds, in this
// order: the master (fp32, 4 B/element; compact: a 16-bit residual, 2 B/element, the bf16 compute
// weights holding the other half), then m and v (fp32 4 + 4, bf16 2 + 2, or 8-bit blockwise codes
// 1 + 1 with one fp32 scale per kMomentBlock elements of the record for each of them, the last block
// possibly short): engine/zero's nvme_record_bytes.
//
// Records in memory: the first N sub-groups' records live in one pinned block (N whole records, back
// to back) all the time and are neither read nor written on NVMe (no swap file holds them); the swap
// files hold the others (each preallocated as a whole record); those are streamed through the
// offload_optimizer.buffer_count swap buffers as before (DeepSpeed's meaning, N = 0): passes
// alternate direction, the last buffer_count streamed records of a pass stay in the buffers, so a
// step reads and writes the streamed records beyond those (the partial last sub-group counted as
// it is). N = kRecordsInMemoryByBudget: as many records as the pinned budget has room for beside
// every other pinned buffer.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tierzero::engine::state_layout {

// Elements of an 8-bit moment block (cpu_adam::kMomentBlock), and the bytes of the scales of one
// block: an fp32 scale for m and one for v.
inline constexpr int64_t kMomentBlock = 256;
inline constexpr int64_t kMomentScaleBytesPerBlock = 8;
// optimizer_records_in_memory: as many records as the pinned budget holds (ZeroEngineOptions'
// kRecordsByBudget, ds_config "auto").
inline constexpr int64_t kRecordsInMemoryByBudget = -1;

enum class Moments : uint8_t { kFp32, kBf16, kInt8Blockwise };

struct Layout {
  bool compact_master = false;  // tierzero.master_weights "compact"
  Moments moments = Moments::kFp32;

  // Bytes of the master part of `numel` elements: 4 or 2 each.
  constexpr int64_t master_bytes(int64_t numel) const { return numel * (compact_master ? 2 : 4); }
  // Bytes of m and v of `numel` elements of one record, their block scales included.
  constexpr int64_t moment_bytes(int64_t numel) const {
    switch (moments) {
      case Moments::kFp32: return 8 * numel;
      case Moments::kBf16: return 4 * numel;
      case Moments::kInt8Blockwise:
        return 2 * numel + (numel + kMomentBlock - 1) / kMomentBlock * kMomentScaleBytesPerBlock;
    }
    return 0;
  }
  // Bytes of one record of `numel` elements.
  constexpr int64_t record_bytes(int64_t numel) const { return master_bytes(numel) + moment_bytes(numel); }
};

// The records of a partition of `partition` elements in sub-groups of `sub_group` (clamped to
// [1, partition]).
struct Records {
  int64_t partition = 0;
  int64_t sub_group = 1;

  constexpr int64_t group() const { return std::max<int64_t>(1, std::min(sub_group, partition)); }
  constexpr int64_t count() const { return partition <= 0 ? 0 : (partition + group() - 1) / group(); }
  // Elements of record k (the last one may be short).
  constexpr int64_t numel(int64_t k) const { return std::min(group(), partition - k * group()); }
  // Bytes of records [first, last) under `layout` (clamped to the records there are).
  constexpr int64_t bytes(const Layout& layout, int64_t first, int64_t last) const {
    first = std::clamp<int64_t>(first, 0, count());
    last = std::clamp<int64_t>(last, first, count());
    if (first == last) return 0;
    const int64_t full = last - 1 - first;  // every record but the last one of the range is whole
    return full * layout.record_bytes(group()) + layout.record_bytes(numel(last - 1));
  }
  constexpr int64_t total_bytes(const Layout& layout) const { return bytes(layout, 0, count()); }
};

// Records kept in pinned memory and their bytes.
struct InMemory {
  int64_t records = 0;
  int64_t bytes = 0;
};

// The records that stay in pinned memory for optimizer_records_in_memory = `requested` (>= 0, or
// kRecordsInMemoryByBudget), each held as a whole record: `requested` capped at the record count; by
// budget, as many as fit `pinned_limit_bytes` less `other_pinned_bytes` (every other pinned buffer:
// gradients, staging slots, swap buffers, parameter shard, ...); none without a limit.
constexpr InMemory records_in_memory(const Layout& layout, const Records& records, int64_t requested,
                                     uint64_t pinned_limit_bytes, uint64_t other_pinned_bytes) {
  const int64_t record = layout.record_bytes(records.group());
  int64_t n = 0;
  if (requested >= 0) {
    n = std::min(requested, records.count());
  } else if (pinned_limit_bytes > other_pinned_bytes && record > 0) {
    const uint64_t room = pinned_limit_bytes - other_pinned_bytes;
    n = static_cast<int64_t>(std::min<uint64_t>(room / static_cast<uint64_t>(record),
                                                static_cast<uint64_t>(records.count())));
  }
  return {n, n * record};
}

// Bytes of the swap files: a whole record for each record not in memory.
constexpr int64_t records_on_nvme_bytes(const Layout& layout, const Records& records, int64_t in_memory) {
  return std::max<int64_t>(0, records.count() - in_memory) * layout.record_bytes(records.group());
}

// Bytes a step reads from NVMe, and as many it writes: the streamed records beyond the
// `buffer_count` the swap buffers keep between passes (a front-to-back pass; the back-to-front one
// moves as many records, the short last one replaced by a whole one).
constexpr int64_t streamed_bytes_per_step(const Layout& layout, const Records& records, int64_t in_memory,
                                          int64_t buffer_count) {
  return records.bytes(layout, in_memory + std::max<int64_t>(buffer_count, 0), records.count());
}

// Bytes of the `buffer_count` pinned swap buffers: one whole record each.
constexpr int64_t swap_buffer_bytes(const Layout& layout, const Records& records, int64_t buffer_count) {
  return std::max<int64_t>(buffer_count, 0) * layout.record_bytes(records.group());
}

}  // namespace tierzero::engine::state_layout
