// FrozenPrefetch (internal/frozen_prefetch.h): a LoRA run's frozen base units on the device, the
// next one copied ahead on a side stream.
#include "engine/model/internal/frozen_prefetch.h"

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <utility>

#include "engine/model/internal/unit_order.h"

namespace tierzero::engine {
namespace {

c10::Stream current_stream(at::Device device) {
  return c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
}

}  // namespace

FrozenPrefetch::FrozenPrefetch(std::function<const std::vector<const at::Tensor*>&(size_t)> host_unit,
                               size_t num_units, at::Device device)
    : host_unit_(std::move(host_unit)),
      num_units_(num_units),
      device_(device),
      side_(c10::impl::getDeviceGuardImpl(device.type())->getStreamFromGlobalPool(device, /*isHighPriority=*/false)) {}

FrozenPrefetch::~FrozenPrefetch() {
  // An unused copy ahead may still be writing memory the allocator would hand out again.
  if (ahead_ && ahead_->done) ahead_->done->synchronize();
}

std::vector<at::Tensor> FrozenPrefetch::unit(size_t u) {
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ && current_->unit == u) {
    order_after(*current_);
    return current_->weights;
  }
  std::optional<Copy> previous = std::move(current_);
  current_.reset();
  if (ahead_ && ahead_->unit == u) {
    current_ = std::move(ahead_);
  } else {
    if (ahead_) order_after(*ahead_);  // not used: its memory goes back only after its copy ran
    current_ = copy_now(u);
  }
  ahead_.reset();
  order_after(*current_);
  const size_t next = next_unit(u, !previous || u > previous->unit, num_units_);
  if (next != u) {
    if (previous && previous->unit == next) {
      ahead_ = std::move(previous);  // the unit just left comes next again (the turn at either end)
    } else {
      ahead_ = copy_ahead(next);
    }
  }
  return current_->weights;
}

FrozenPrefetch::Copy FrozenPrefetch::copy_now(size_t u) const {
  Copy copy;
  copy.unit = u;
  for (const at::Tensor* weight : host_unit_(u)) copy.weights.push_back(weight->to(device_, weight->is_pinned()));
  return copy;
}

FrozenPrefetch::Copy FrozenPrefetch::copy_ahead(size_t u) const {
  Copy copy;
  copy.unit = u;
  const std::vector<const at::Tensor*>& host = host_unit_(u);
  for (const at::Tensor* weight : host)  // allocated in the compute stream's order
    copy.weights.push_back(at::empty_like(*weight, weight->options().device(device_).pinned_memory(false)));
  c10::Event compute_here(device_.type());
  compute_here.record(current_stream(device_));
  compute_here.block(side_);  // the memory may still be read by work queued before this point
  {
    c10::StreamGuard on_side(side_);
    for (size_t i = 0; i < host.size(); ++i) copy.weights[i].copy_(*host[i], /*non_blocking=*/host[i]->is_pinned());
  }
  copy.done = std::make_unique<c10::Event>(device_.type());
  copy.done->record(side_);
  return copy;
}

void FrozenPrefetch::order_after(const Copy& copy) const {
  if (copy.done) copy.done->block(current_stream(device_));
}

}  // namespace tierzero::engine
