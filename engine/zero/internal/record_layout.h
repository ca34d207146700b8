// The bytes of one offloaded optimizer sub-group's record, torch-free so the planner can size records
// with the same arithmetic the NVMe optimizer lays them out with (nvme_offload_adam.h). A record of n
// elements holds, back to back: the master (fp32, 4 B/element; compact: the int16 residual, 2
// B/element, its bf16 half being the 16-bit weights), exp_avg and exp_avg_sq (fp32 4 + 4, bf16 2 +
// 2, or 8-bit codes 1 + 1: int8 m, uint8 v), then, with 8-bit moments, one fp32 scale per
// kMomentBlock elements (the last block possibly short) for m, and one for v.
#pragma once

#include <cstdint>

namespace tierzero::engine {

enum class RecordPart : uint8_t { kMaster, kExpAvg, kExpAvgSq, kExpAvgScales, kExpAvgSqScales, kEnd };

struct RecordLayout {
  bool compact_master = false;
  int moment_bytes = 4;  // bytes of one moment element: 4 (fp32), 2 (bf16), 1 (8-bit codes, then scales)
  static constexpr int64_t kMomentBlock = 256;  // cpu_adam::kMomentBlock

  // Bytes of one element of `part`.
  constexpr int64_t element_bytes(RecordPart part) const {
    return part == RecordPart::kMaster ? (compact_master ? 2 : 4) : part <= RecordPart::kExpAvgSq ? moment_bytes : 4;
  }
  // Elements of `part` in a record of `numel`: numel, or the scale blocks (none unless 8-bit).
  constexpr int64_t elements(RecordPart part, int64_t numel) const {
    if (part <= RecordPart::kExpAvgSq) return numel;
    return moment_bytes == 1 ? (numel + kMomentBlock - 1) / kMomentBlock : 0;
  }
  constexpr uint64_t part_bytes(RecordPart part, int64_t numel) const {
    return static_cast<uint64_t>(elements(part, numel) * element_bytes(part));
  }
  // Byte offset of `part` in a record of `numel` elements (kEnd: the record's bytes).
  constexpr uint64_t offset(RecordPart part, int64_t numel) const {
    uint64_t bytes = 0;
    for (auto p = RecordPart::kMaster; p < part; p = static_cast<RecordPart>(static_cast<int>(p) + 1))
      bytes += part_bytes(p, numel);
    return bytes;
  }
  constexpr uint64_t bytes(int64_t numel) const { return offset(RecordPart::kEnd, numel); }
};

}  // namespace tierzero::engine
