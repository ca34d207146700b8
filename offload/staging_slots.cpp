// The staging slots (offload.h): pinned buffers of one size lent one at a time, the last given back
// lent first; and the record slots over them, lent to records one each.
#include "offload/offload.h"

#include <cstring>
#include <utility>

namespace tierzero::offload {

StagingSlots::StagingSlots(std::vector<std::span<std::byte>> slots) : slots_(std::move(slots)) {
  for (size_t i = slots_.size(); i-- > 0;) free_.push_back(i);  // slot 0 lent first
}

size_t StagingSlots::take() {
  std::unique_lock lock(mutex_);
  given_.wait(lock, [&] { return !free_.empty(); });
  const size_t slot = free_.back();
  free_.pop_back();
  return slot;
}

void StagingSlots::give(size_t slot) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(slot);
  }
  given_.notify_one();
}

RecordSlots::RecordSlots(std::vector<std::span<std::byte>> slots, int64_t records)
    : slots_(std::move(slots)), slot_(static_cast<size_t>(records), -1) {}

std::span<std::byte> RecordSlots::hold(int64_t record) {
  if (const std::span<std::byte> held = slot_of(record); !held.empty()) return held;
  const size_t taken = slots_.take();  // without mutex_: release() and abandon() free slots meanwhile
  std::lock_guard lock(mutex_);
  int64_t& slot = slot_[static_cast<size_t>(record)];
  if (slot >= 0) {
    slots_.give(taken);  // another thread lent the record one meanwhile
  } else {
    slot = static_cast<int64_t>(taken);
  }
  return slots_.bytes(static_cast<size_t>(slot));
}

std::span<std::byte> RecordSlots::slot_of(int64_t record) const {
  std::lock_guard lock(mutex_);
  const int64_t slot = slot_[static_cast<size_t>(record)];
  return slot < 0 ? std::span<std::byte>() : slots_.bytes(static_cast<size_t>(slot));
}

std::vector<std::pair<int64_t, std::span<std::byte>>> RecordSlots::held() const {
  std::vector<std::pair<int64_t, std::span<std::byte>>> held;
  std::lock_guard lock(mutex_);
  for (size_t record = 0; record < slot_.size(); ++record)
    if (slot_[record] >= 0)
      held.emplace_back(static_cast<int64_t>(record), slots_.bytes(static_cast<size_t>(slot_[record])));
  return held;
}

std::optional<size_t> RecordSlots::release(int64_t record) {
  std::lock_guard lock(mutex_);
  const int64_t slot = std::exchange(slot_[static_cast<size_t>(record)], -1);
  if (slot < 0) return std::nullopt;
  return static_cast<size_t>(slot);
}

void RecordSlots::free(size_t slot) {
  const std::span<std::byte> bytes = slots_.bytes(slot);
  std::memset(bytes.data(), 0, bytes.size());
  slots_.give(slot);
}

void RecordSlots::abandon() {
  std::lock_guard lock(mutex_);
  for (int64_t& slot : slot_)
    if (slot >= 0) free(static_cast<size_t>(std::exchange(slot, -1)));
}

}  // namespace tierzero::offload
