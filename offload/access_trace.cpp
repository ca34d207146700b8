#include "offload/internal/access_trace.h"

#include <algorithm>

namespace tierzero::offload {

void AccessTrace::begin() {
  recording_ = true;
  entries_.clear();
  positions_.clear();
  cursor_ = 0;
}

void AccessTrace::end() {
  recording_ = false;
  cursor_ = 0;
}

void AccessTrace::on_fetch(const std::string& id, Tier tier) {
  if (recording_) {
    positions_[id].push_back(entries_.size());
    entries_.push_back({id, tier});
    return;
  }
  if (!replaying()) return;
  const uint64_t distance = next_use(id);
  if (distance == kNever) return;
  cursor_ = (cursor_ + distance + 1) % entries_.size();
}

uint64_t AccessTrace::next_use(const std::string& id) const {
  if (!replaying()) return kNever;
  auto it = positions_.find(id);
  if (it == positions_.end()) return kNever;
  const std::vector<uint64_t>& pos = it->second;
  auto next = std::lower_bound(pos.begin(), pos.end(), cursor_);
  if (next != pos.end()) return *next - cursor_;
  return pos.front() + entries_.size() - cursor_;
}

}  // namespace tierzero::offload
