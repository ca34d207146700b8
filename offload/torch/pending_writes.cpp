#include "offload/torch/offload_torch.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace tierzero::offload {

void PendingWrites::add(std::vector<PartitionWrite> writes) {
  writes_.insert(writes_.end(), std::make_move_iterator(writes.begin()), std::make_move_iterator(writes.end()));
}

void PendingWrites::order_range(int64_t begin, int64_t end) {
  auto overlaps = [&](const PartitionWrite& w) { return w.begin < end && begin < w.begin + w.count; };
  for (PartitionWrite& w : writes_)
    if (overlaps(w)) w.done->order_current_stream();
  writes_.erase(std::remove_if(writes_.begin(), writes_.end(), overlaps), writes_.end());
}

void PendingWrites::order_all() {
  for (PartitionWrite& w : writes_) w.done->order_current_stream();
  writes_.clear();
}

}  // namespace tierzero::offload
