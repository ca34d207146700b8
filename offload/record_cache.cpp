// The record cache (offload.h): records in a pinned block or, direct-mapped, in the staging buffers
// of a RecordStaging, with write-back, read-ahead and write-behind.
#include <algorithm>
#include <utility>

#include "offload/offload.h"

namespace tierzero::offload {

Result<std::unique_ptr<RecordCache>> RecordCache::create(const std::vector<std::span<std::byte>>& buffers,
                                                         std::span<std::byte> memory, RecordCacheOptions options) {
  std::unique_ptr<RecordCache> cache(new RecordCache());
  cache->bytes_ = std::move(options.record_bytes);
  const int64_t records = cache->records();
  const int64_t memory_records = std::clamp<int64_t>(options.memory_records, 0, records);
  for (uint64_t bytes : cache->bytes_) cache->stride_ = std::max(cache->stride_, bytes);
  cache->read_ahead_ = options.read_ahead;
  cache->write_behind_ = options.write_behind;
  cache->memory_ = memory;
  cache->slots_.resize(buffers.size());
  const uint64_t chunk = options.file_record_bytes;  // 0: one file record per record
  const uint64_t file_record = chunk > 0 ? chunk : cache->stride_;
  const int64_t streamed = records - memory_records;
  int64_t on_files = 0;        // file records
  uint64_t memory_bytes = 0;   // the block's records before record r
  std::vector<int64_t> names;  // the record each file record is a part of
  for (int64_t r = 0; r < records; ++r) {
    // Spread: record r is streamed where the count of streamed records up to it, r * streamed /
    // records rounded down, steps up (the last record always).
    const bool on_nvme =
        options.spread_memory ? (r + 1) * streamed / records > r * streamed / records : r >= memory_records;
    cache->first_file_.push_back(on_files);
    cache->memory_offset_.push_back(on_nvme ? -1 : static_cast<int64_t>(memory_bytes));
    cache->streamed_index_.push_back(on_nvme ? static_cast<int64_t>(cache->streamed_.size()) : -1);
    if (!on_nvme) {
      memory_bytes += cache->bytes_[r];
      continue;
    }
    cache->streamed_.push_back(r);
    const int64_t files = chunk > 0 ? static_cast<int64_t>((cache->bytes_[r] + chunk - 1) / chunk) : 1;
    on_files += files;
    names.insert(names.end(), files, r);
  }
  if (chunk % RecordStaging::kRecordAlignment != 0)
    return internal_error("record cache: file records of " + std::to_string(chunk) + " bytes are not 4096-aligned");
  if (memory.size() < memory_bytes)
    return internal_error("record cache: the pinned block of the " + std::to_string(memory_records) +
                          " records kept in memory is " + std::to_string(memory.size()) + " bytes, not " +
                          std::to_string(memory_bytes));
  if (on_files > 0 && buffers.empty()) return internal_error("record cache: records on NVMe need a buffer");
  for (const std::span<std::byte>& buffer : buffers)
    if (buffer.size() < cache->stride_)
      return internal_error("record cache: a buffer of " + std::to_string(buffer.size()) + " bytes is smaller than a " +
                            std::to_string(cache->stride_) + "-byte record");
  options.files.records = on_files;
  options.files.record_bytes = file_record;
  TZ_ASSIGN_OR_RETURN(cache->staging_, RecordStaging::create(buffers, options.files, std::move(names)));
  return cache;
}

RecordCache::~RecordCache() {
  for (Slot& slot : slots_)
    if (slot.reader) slot.reader->wait_host();
}  // the staging then waits for its transfers

size_t RecordCache::buffer_of(int64_t record) const {
  return static_cast<size_t>(streamed_index_[static_cast<size_t>(record)] % static_cast<int64_t>(slots_.size()));
}

// Makes buffer b free for `record`: its dirty record (another one) written, its transfers done, its
// reader finished. Holds nothing afterwards unless it held `record` (then dirty stays as it was).
Status RecordCache::claim(size_t b, int64_t record) {
  Slot& slot = slots_[b];
  if (slot.acquired)
    return internal_error("record cache: record " + std::to_string(slot.record) + "'s buffer is taken for record " +
                          std::to_string(record) + " before its release");
  if (slot.dirty && slot.record != record) TZ_RETURN_IF_ERROR(write(b));  // evicted: written first
  TZ_RETURN_IF_ERROR(timed([&] {
    Status read = staging_->wait_read(b);
    return read.ok() ? staging_->wait_write(b) : read;
  }));
  if (slot.reader) slot.reader->wait_host();
  slot.reader = nullptr;
  if (slot.record != record) slot = Slot{.record = record};
  return Status();
}

Status RecordCache::write(size_t b) {
  Slot& slot = slots_[b];
  slot.dirty = false;
  staging_->write(b, first_file_[slot.record], 0, slot.end);
  written_bytes_ += slot.end;
  return write_behind_ ? Status() : timed([&] { return staging_->wait_write(b); });
}

Status RecordCache::wait_read(size_t b) {
  Status status = timed([&] { return staging_->wait_read(b); });
  if (!status.ok()) slots_[b] = Slot{};  // its bytes are not the record's
  return status;
}

Status RecordCache::prefetch(int64_t record) { return fetch(record, 0, record_bytes(record), true); }

Status RecordCache::prefetch_range(int64_t record, uint64_t begin, uint64_t end) {
  return fetch(record, begin, end, false);
}

Status RecordCache::fetch(int64_t record, uint64_t begin, uint64_t end, bool whole) {
  if (in_memory(record)) return Status();
  const size_t b = buffer_of(record);
  const Slot& held = slots_[b];
  if (held.record == record && held.begin <= begin && held.end >= end && (held.whole || !whole)) return Status();
  const uint64_t aligned = RecordStaging::align_down(begin);  // O_DIRECT
  TZ_RETURN_IF_ERROR(claim(b, record));                       // a dirty record is whole: it held the range
  staging_->read(b, first_file_[record], aligned, end);
  if (whole) read_bytes_ += end;
  slots_[b] = Slot{.record = record, .begin = aligned, .end = end, .whole = whole};
  return Status();
}

bool RecordCache::needed(std::span<const int64_t> pass, size_t position, size_t b) const {
  for (size_t p = position; p < pass.size(); ++p)
    if (buffer_of(pass[p]) == b) return true;
  return false;
}

Status RecordCache::prefetch_ahead(std::span<const int64_t> pass, size_t position, bool again) {
  const auto buffers = static_cast<int64_t>(slots_.size());
  const size_t depth = read_ahead_ && buffers >= 2 ? static_cast<size_t>(std::max<int64_t>(1, buffers - 2)) : 0;
  for (size_t p = position; p <= position + depth; ++p) {
    if (p < pass.size()) {
      TZ_RETURN_IF_ERROR(prefetch(pass[p]));
      continue;
    }
    if (!again || p - pass.size() >= pass.size()) break;
    const int64_t next = pass[p - pass.size()];  // the next pass's
    const size_t b = buffer_of(next);
    if (!slots_[b].acquired && !needed(pass, position, b)) TZ_RETURN_IF_ERROR(prefetch(next));
  }
  return Status();
}

RecordCache::Release RecordCache::changed(std::span<const int64_t> pass, size_t position, bool again) const {
  return !again && position + slots_.size() >= pass.size() ? Release::kDirty : Release::kWrite;
}

std::vector<int64_t> RecordCache::pass(Sweep sweep) const {
  bool backward = sweep == Sweep::kBackToFront;
  if (sweep == Sweep::kAlternate) {
    int64_t lowest = records();
    for (const Slot& slot : slots_)
      if (slot.whole) lowest = std::min(lowest, slot.record);
    backward = lowest < records() && lowest > streamed_.front();
  }
  std::vector<int64_t> order = streamed_;
  if (backward) std::reverse(order.begin(), order.end());
  return order;
}

Result<std::span<std::byte>> RecordCache::acquire(int64_t record, Access access) {
  const uint64_t bytes = record_bytes(record);
  if (in_memory(record)) return memory_.subspan(memory_offset(record), bytes);
  const size_t b = buffer_of(record);
  if (access == Access::kOverwrite) {
    TZ_RETURN_IF_ERROR(claim(b, record));
    slots_[b] = Slot{.record = record, .begin = 0, .end = bytes, .whole = true, .dirty = slots_[b].dirty};
  } else {
    TZ_RETURN_IF_ERROR(prefetch(record));
    TZ_RETURN_IF_ERROR(wait_read(b));
    if (slots_[b].reader) slots_[b].reader->wait_host();  // the caller may change the bytes
    slots_[b].reader = nullptr;
  }
  slots_[b].acquired = true;
  return staging_->buffer(b).subspan(0, bytes);
}

Result<std::span<const std::byte>> RecordCache::acquire_range(int64_t record, uint64_t begin, uint64_t end) {
  if (in_memory(record)) return std::span<const std::byte>(memory_.subspan(memory_offset(record) + begin, end - begin));
  const size_t b = buffer_of(record);
  TZ_RETURN_IF_ERROR(prefetch_range(record, begin, end));
  TZ_RETURN_IF_ERROR(wait_read(b));
  slots_[b].acquired = true;
  return std::span<const std::byte>(staging_->buffer(b).subspan(begin, end - begin));
}

Status RecordCache::release(int64_t record, Release how, std::shared_ptr<ReaderFence> reader) {
  if (in_memory(record)) return Status();
  const size_t b = buffer_of(record);
  Slot& slot = slots_[b];
  if (slot.record != record || !slot.acquired)
    return internal_error("record cache: record " + std::to_string(record) + " released but not acquired");
  slot.acquired = false;
  slot.reader = std::move(reader);
  if (how == Release::kClean) return Status();
  slot.dirty = true;
  return how == Release::kWrite ? write(b) : Status();
}

Status RecordCache::flush() {
  for (size_t b = 0; b < slots_.size(); ++b)
    if (slots_[b].dirty) TZ_RETURN_IF_ERROR(write(b));
  return wait_writes();
}

Status RecordCache::wait_writes() {
  Status first;
  for (size_t b = 0; b < slots_.size(); ++b) {
    Status status = staging_->wait_write(b);
    if (!status.ok()) slots_[b] = Slot{};
    if (first.ok()) first = std::move(status);
  }
  return first;
}

void RecordCache::discard() {
  for (Slot& slot : slots_) {
    std::shared_ptr<ReaderFence> reader = std::move(slot.reader);  // still waited for before reuse
    slot = Slot{.reader = std::move(reader)};
  }
}

}  // namespace tierzero::offload
