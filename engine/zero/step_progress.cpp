#include "engine/zero/internal/step_progress.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <iterator>
#include <utility>

namespace tierzero::engine {

void StepProgress::start(int64_t total) {
  std::lock_guard lock(mutex_);
  total_ = total;
  ready_ = 0;
  error_ = Status{};
  writes_.clear();
}

void StepProgress::publish(int64_t end, std::vector<PartitionWrite> writes) {
  {
    std::lock_guard lock(mutex_);
    ready_ = std::max(ready_, std::min(end, total_));
    writes_.insert(writes_.end(), std::make_move_iterator(writes.begin()), std::make_move_iterator(writes.end()));
  }
  advanced_.notify_all();
}

void StepProgress::fail(Status error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
  }
  advanced_.notify_all();
}

std::vector<PartitionWrite> StepProgress::wait_for(int64_t end) {
  std::unique_lock lock(mutex_);
  end = std::min(end, total_);
  if (ready_ < end && error_.ok()) {
    RECORD_USER_SCOPE("tierzero::wait_optimizer");
    std::unique_ptr<IdleGap> gap = copies_ != nullptr ? copies_->open_idle_gap() : nullptr;
    advanced_.wait(lock, [&] { return ready_ >= end || !error_.ok(); });
    if (gap) {
      gap->end();
      gaps_.push_back(std::move(gap));
    }
  }
  if (!error_.ok()) throw Error(error_);
  return std::exchange(writes_, {});
}

double StepProgress::take_idle_seconds() {
  double seconds = 0.0;
  for (const std::unique_ptr<IdleGap>& gap : gaps_) seconds += gap->seconds();
  gaps_.clear();
  return seconds;
}

}  // namespace tierzero::engine
