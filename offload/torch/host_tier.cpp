#include "offload/torch/offload_torch.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <span>
#include <vector>

#include "common/common.h"

namespace tierzero::offload {

std::unique_ptr<HostTier> HostTier::create(const std::vector<PinnedBufferSpec>& buffers, uint64_t limit_bytes,
                                           at::Device device, int rank) {
  std::string listing;
  for (const PinnedBufferSpec& buffer : buffers) {
    if (buffer.bytes == 0) continue;
    listing += (listing.empty() ? "" : ", ") + std::string(pinned_role_name(buffer.role)) + " " +
               std::to_string(buffer.index) + " " + format_bytes(buffer.bytes);
  }
  const uint64_t capacity = pinned_capacity(buffers);
  if (limit_bytes > 0 && capacity > limit_bytes)
    throw Error(out_of_space("rank " + std::to_string(rank) + ": the offloaded step needs " + format_bytes(capacity) +
                             " (" + std::to_string(capacity) + " bytes) of pinned host memory (" + listing +
                             ") but tierzero.pinned_memory_limit is " + format_bytes(limit_bytes) + " (" +
                             std::to_string(limit_bytes) +
                             " bytes); raise tierzero.pinned_memory_limit, lower "
                             "offload_optimizer.buffer_count (staging slots), or use more ranks"));
  PinnedPoolOptions options{.capacity_bytes = capacity,
                            .device = device.is_cuda() ? DeviceChoice::kAuto : DeviceChoice::kHost,
                            .cuda_device = device.is_cuda() ? device.index() : 0,
                            .lock_host_memory = false};
  std::unique_ptr<HostTier> tier(new HostTier());
  Result<std::unique_ptr<PinnedHostPool>> pool = PinnedHostPool::create(options);
  if (!pool.ok())
    throw Error(pool.status().with_context("rank " + std::to_string(rank) + ": offloaded step's host buffers (" +
                                           listing + ")"));
  tier->pool_ = std::move(pool).value();
  // Largest first: a block's alignment grows with its size, so each block starts where the last one
  // left the pool aligned for it, and the footprints summed above are what the blocks take.
  std::vector<const PinnedBufferSpec*> by_size;
  for (const PinnedBufferSpec& buffer : buffers) by_size.push_back(&buffer);
  std::stable_sort(by_size.begin(), by_size.end(),
                   [](const PinnedBufferSpec* a, const PinnedBufferSpec* b) { return a->bytes > b->bytes; });
  for (const PinnedBufferSpec* buffer : by_size) {
    Held& held = tier->buffers_[{buffer->role, buffer->index}];
    if (held.bytes > 0 || held.data != nullptr)
      throw Error(internal_error(std::string("pinned buffer ") + pinned_role_name(buffer->role) + " " +
                                 std::to_string(buffer->index) + " listed twice"));
    held.bytes = buffer->bytes;
    if (buffer->bytes == 0) continue;
    held.data = value_or_throw(tier->pool_->allocate(buffer->bytes));  // zero: a fresh pool's, faulted in
  }
  return tier;
}

at::Tensor HostTier::buffer(PinnedRole role, at::ScalarType dtype, int index) const {
  auto it = buffers_.find({role, index});
  const std::string name = std::string(pinned_role_name(role)) + " " + std::to_string(index);
  if (it == buffers_.end()) throw Error(internal_error("pinned buffer " + name + " was not listed"));
  const auto element = static_cast<uint64_t>(c10::elementSize(dtype));
  if (it->second.bytes % element != 0)
    throw Error(internal_error("pinned buffer " + name + " is not a whole number of " + c10::toString(dtype)));
  const at::TensorOptions options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  const auto numel = static_cast<int64_t>(it->second.bytes / element);
  if (numel == 0) return at::empty({0}, options);
  return at::from_blob(it->second.data, {numel}, options);
}

int64_t HostTier::pinned_bytes() const { return pool_->gpu_pinned() ? static_cast<int64_t>(pool_->capacity()) : 0; }

int64_t HostTier::bytes() const { return static_cast<int64_t>(pool_->capacity()); }

int64_t HostTier::used_bytes() const { return static_cast<int64_t>(pool_->used()); }

std::string HostTier::description() const { return pool_->description(); }

std::span<std::byte> bytes_of(const at::Tensor& tensor) {
  return {static_cast<std::byte*>(tensor.data_ptr()), static_cast<size_t>(tensor.nbytes())};
}

std::vector<std::span<std::byte>> bytes_of(const std::vector<at::Tensor>& tensors) {
  std::vector<std::span<std::byte>> spans;
  for (const at::Tensor& tensor : tensors) spans.push_back(bytes_of(tensor));
  return spans;
}

at::Tensor byte_tensor(std::span<const std::byte> bytes) {
  return at::from_blob(const_cast<std::byte*>(bytes.data()), {static_cast<int64_t>(bytes.size())}, at::kByte);
}

}  // namespace tierzero::offload
