// A compact checkpoint's view of an offloaded optimizer's state (stored_records.h).
#include "engine/zero/internal/stored_records.h"

#include <algorithm>
#include <string>

#include "checkpoint/storage/storage.h"

namespace tierzero::engine {
namespace {

// The record the save's readers are on: acquired at the first piece asked of it, released after
// the last part's piece of it (or when the readers go, a save stopped by an error).
class RecordCursor {
 public:
  explicit RecordCursor(StoredRecords& records) : records_(records) {}
  ~RecordCursor() {
    if (held_ >= 0) (void)records_.release(held_, false);
  }
  Status hold(int64_t k) {
    if (held_ == k) return Status();
    if (held_ >= 0) TZ_RETURN_IF_ERROR(let_go());
    TZ_RETURN_IF_ERROR(records_.acquire(k, false));
    held_ = k;
    return Status();
  }
  Status let_go() {
    const int64_t k = held_;
    held_ = -1;
    return records_.release(k, false);
  }
  StoredRecords& records() { return records_; }

 private:
  StoredRecords& records_;
  int64_t held_ = -1;
};

int64_t record_count(int64_t numel, int64_t record_numel) { return (numel + record_numel - 1) / record_numel; }

}  // namespace

std::vector<StoredPart> stored_parts(const StoredLayout& layout) {
  std::vector<StoredPart> parts;
  if (layout.record.compact_master) {
    parts.push_back({.state = 0, .part = 0, .where = RecordPart::kEnd});
    parts.push_back({.state = 0, .part = 1, .where = RecordPart::kMaster});
  } else {
    parts.push_back({.state = 0, .part = 0, .where = RecordPart::kMaster});
  }
  for (int s = 1; s <= 2; ++s) {
    parts.push_back({.state = s, .part = 0, .where = s == 1 ? RecordPart::kExpAvg : RecordPart::kExpAvgSq});
    if (layout.moments_8bit())
      parts.push_back(
          {.state = s, .part = 1, .where = s == 1 ? RecordPart::kExpAvgScales : RecordPart::kExpAvgSqScales});
  }
  return parts;
}

uint64_t stored_part_bytes(const StoredLayout& layout, const StoredPart& part, int64_t count) {
  return part.where == RecordPart::kEnd ? static_cast<uint64_t>(count) * 2
                                        : static_cast<uint64_t>(layout.record.part_bytes(part.where, count));
}

std::vector<StateReader> stored_readers(StoredRecords& records, const StoredLayout& layout, int64_t numel) {
  const std::vector<StoredPart> parts = stored_parts(layout);
  const int64_t record = std::max<int64_t>(1, layout.record_numel);
  const int64_t groups = record_count(numel, record);
  auto cursor = std::make_shared<RecordCursor>(records);
  std::vector<StateReader> readers;
  for (size_t p = 0; p < parts.size(); ++p) {
    const bool last = p + 1 == parts.size();
    readers.push_back([cursor, layout, part = parts[p], last, groups, record, numel, k = int64_t{0},
                       offset = uint64_t{0}](std::span<std::byte> out) mutable -> Status {
      for (size_t filled = 0; filled < out.size();) {
        if (k >= groups)
          return internal_error("optimizer state " + std::to_string(part.state) + " part " + std::to_string(part.part) +
                                " read past the partition's end");
        TZ_RETURN_IF_ERROR(cursor->hold(k));
        const std::span<std::byte> bytes = cursor->records().part(k, part);
        const size_t n = std::min<size_t>(bytes.size() - offset, out.size() - filled);
        checkpoint::copy_in_parallel(out.subspan(filled, n), bytes.subspan(offset, n));
        filled += n;
        offset += n;
        if (offset == stored_part_bytes(layout, part, std::min(record, numel - k * record))) {
          if (last) TZ_RETURN_IF_ERROR(cursor->let_go());
          ++k;
          offset = 0;
        }
      }
      return Status();
    });
  }
  return readers;
}

Status load_stored_records(StoredRecords& records, const StoredLayout& layout, int64_t numel, const StoredFill& fill) {
  const std::vector<StoredPart> parts = stored_parts(layout);
  const int64_t record = std::max<int64_t>(1, layout.record_numel);
  for (int64_t k = 0; k < record_count(numel, record); ++k) {
    TZ_RETURN_IF_ERROR(records.acquire(k, true));
    Status status;
    for (const StoredPart& part : parts) {
      // Records before k are whole: part bytes of k * record elements (scales: a whole number of blocks).
      status = fill(part.state, part.part, stored_part_bytes(layout, part, k * record), records.part(k, part));
      if (!status.ok()) break;
    }
    const Status released = records.release(k, status.ok());
    TZ_RETURN_IF_ERROR(status);
    TZ_RETURN_IF_ERROR(released);
  }
  return Status();
}

}  // namespace tierzero::engine
