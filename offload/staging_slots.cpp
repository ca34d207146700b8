// The staging slots (offload.h): pinned buffers of one size lent one at a time, the last given back
// lent first.
#include "offload/offload.h"

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

}  // namespace tierzero::offload
