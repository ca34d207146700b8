#include "engine/zero/internal/grads_final.h"

#include <algorithm>
#include <utility>

namespace tierzero::engine {

void GradsFinal::start(int64_t numel, HostGradPipeline* lender) {
  std::lock_guard lock(mutex_);
  from_ = numel;
  error_ = Status{};
  lender_ = lender;
}

void GradsFinal::mark_from(int64_t from) {
  {
    std::lock_guard lock(mutex_);
    from_ = std::min(from_, std::max<int64_t>(from, 0));
  }
  advanced_.notify_all();
}

void GradsFinal::fail(Status error) {
  {
    std::lock_guard lock(mutex_);
    error_ = std::move(error);
  }
  advanced_.notify_all();
}

void GradsFinal::wait_from(int64_t begin) {
  std::unique_lock lock(mutex_);
  advanced_.wait(lock, [&] { return from_ <= begin || !error_.ok(); });
  if (!error_.ok()) throw Error(error_);
}

}  // namespace tierzero::engine
