// A compact checkpoint's view of an offloaded optimizer's state: the parts a checkpoint stores
// (checkpoint/engine_format: format_version 3's kCompactMaster and kBlockwise8 states, kRaw states as
// they are) are the parts of the optimizer's records (engine/layout's state_layout::Layout) plus the bf16 weights, so a
// save streams them record by record from wherever each record lives and a resume at the same layout
// fills the records straight back, never through fp32: the records of the offloaded optimizer's
// RecordCache (record_adam.h), in pinned memory or on NVMe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/common.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {

// One stored part: part `part` of state `state` (0 master, 1 exp_avg, 2 exp_avg_sq; the
// checkpoint's state_parts() order), and where its bytes live: a record part, or kEnd for the
// compact master's "hi" (the bf16 weights, outside the record).
struct StoredPart {
  int state = 0;
  int part = 0;
  RecordPart where = RecordPart::kMaster;
};
// The parts of `layout` in the order a checkpoint stores them: compact master hi, residual (else the
// fp32 master); per moment its codes and scales (8-bit) or its raw elements.
std::vector<StoredPart> stored_parts(const StoredLayout& layout);
// Bytes of `part` for `count` partition elements (scales: one fp32 per started kMomentBlock).
uint64_t stored_part_bytes(const StoredLayout& layout, const StoredPart& part, int64_t count);

// The records of an optimizer's state, lent one at a time (an NVMe record read into a buffer).
class StoredRecords {
 public:
  virtual ~StoredRecords() = default;
  // Record k ready for part(): read, or (`overwrite`) its bytes about to be replaced whole.
  virtual Status acquire(int64_t k, bool overwrite) = 0;
  // `part`'s bytes of acquired record k.
  virtual std::span<std::byte> part(int64_t k, const StoredPart& part) = 0;
  // Gives record k back; `written`: its bytes were replaced (to be written to its file).
  virtual Status release(int64_t k, bool written) = 0;
};

// One StateReader per stored part of a partition of `numel` elements in records of
// layout.record_numel, in stored_parts() order, for RankData::group_state_fills with piece_elements
// the record size: they share one cursor, which acquires record k at the first piece asked of it and
// releases it after the last part's piece (a record read once when asked hi[k], residual[k], ...,
// then k+1). Each reader streams its part forward and may stop anywhere. `records` outlives them.
std::vector<StateReader> stored_readers(StoredRecords& records, const StoredLayout& layout, int64_t numel);

// Fills every record from `fill` (a resume at the same layout), record by record: each acquired for
// overwrite, its pieces of every part filled in stored_parts() order, released written. A fill
// error releases the record unwritten and is returned.
Status load_stored_records(StoredRecords& records, const StoredLayout& layout, int64_t numel, const StoredFill& fill);

}  // namespace tierzero::engine
