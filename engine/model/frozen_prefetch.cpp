// FrozenPrefetch (internal/frozen_prefetch.h): a LoRA run's frozen base units on the device, the
// next one copied ahead through DeviceCopies.
#include "engine/model/internal/frozen_prefetch.h"

#include <utility>

#include "engine/model/internal/unit_order.h"

namespace tierzero::engine {

FrozenPrefetch::FrozenPrefetch(const std::vector<std::vector<const at::Tensor*>>& host_units, at::Device device)
    : host_units_(host_units), device_(device), copies_(offload::DeviceCopies::create(device, /*timing=*/false)) {}

FrozenPrefetch::~FrozenPrefetch() {
  // A copy may still be reading host memory its owner frees after this.
  for (const std::optional<Copy>* copy : {&current_, &ahead_})
    if (*copy) (*copy)->weights.done->wait_host();
}

std::vector<at::Tensor> FrozenPrefetch::unit(size_t u) {
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ && current_->unit == u) {
    current_->weights.done->order_current_stream();
    return current_->weights.tensors;
  }
  std::optional<Copy> previous = std::move(current_);
  current_ = ahead_ && ahead_->unit == u ? std::move(ahead_) : copy(u);
  ahead_.reset();
  current_->weights.done->order_current_stream();
  const size_t next = next_unit(u, !previous || u > previous->unit, host_units_.size());
  if (next != u) {
    if (previous && previous->unit == next) {
      ahead_ = std::move(previous);  // the unit just left comes next again (the turn at either end)
    } else {
      ahead_ = copy(next);
    }
  }
  return current_->weights.tensors;
}

FrozenPrefetch::Copy FrozenPrefetch::copy(size_t u) const {
  return {.unit = u, .weights = copies_->upload(host_units_.at(u))};
}

}  // namespace tierzero::engine
