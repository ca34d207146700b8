#include "offload/torch/offload_torch.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/common.h"

namespace tierzero::offload {
namespace {

// memset on every core of LibTorch's intra-op pool: first touching tens of GB on one thread is the
// slow part of a large engine's start-up.
void zero_fill(void* data, uint64_t bytes) {
  constexpr int64_t kGrain = 64 << 20;
  at::parallel_for(0, static_cast<int64_t>(bytes), kGrain, [data](int64_t begin, int64_t end) {
    std::memset(static_cast<std::byte*>(data) + begin, 0, static_cast<size_t>(end - begin));
  });
}

}  // namespace

uint64_t HostTier::capacity(const std::vector<PinnedBuffer>& plan) {
  uint64_t capacity = 0;
  for (const PinnedBuffer& buffer : plan) {
    const uint64_t bytes = static_cast<uint64_t>(buffer.numel) * c10::elementSize(buffer.dtype);
    if (bytes > 0) capacity += PinnedHostPool::footprint(bytes);
  }
  return (capacity + 4095) / 4096 * 4096;
}

std::unique_ptr<HostTier> HostTier::create(const std::vector<PinnedBuffer>& plan, uint64_t limit_bytes,
                                           at::Device device, int rank) {
  uint64_t capacity = 0;
  std::string listing;
  for (const PinnedBuffer& buffer : plan) {
    const uint64_t bytes = static_cast<uint64_t>(buffer.numel) * c10::elementSize(buffer.dtype);
    if (bytes == 0) continue;
    capacity += PinnedHostPool::footprint(bytes);
    listing += (listing.empty() ? "" : ", ") + buffer.what + " " + format_bytes(bytes);
  }
  // A whole number of pages: the pool's top end is then aligned for any small block placed there.
  capacity = (capacity + 4095) / 4096 * 4096;
  if (limit_bytes > 0 && capacity > limit_bytes)
    throw Error(out_of_space("rank " + std::to_string(rank) + ": the offloaded step needs " + format_bytes(capacity) +
                             " (" + std::to_string(capacity) + " bytes) of pinned host memory (" + listing +
                             ") but tierzero.pinned_memory_limit is " + format_bytes(limit_bytes) + " (" +
                             std::to_string(limit_bytes) +
                             " bytes); raise tierzero.pinned_memory_limit, lower "
                             "offload_optimizer.buffer_count (staging slots), or use more ranks"));
  PinnedPoolOptions options{
      .capacity_bytes = capacity,
      .arena_bytes = 0,
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
  std::vector<const PinnedBuffer*> by_size;
  for (const PinnedBuffer& buffer : plan) by_size.push_back(&buffer);
  std::stable_sort(by_size.begin(), by_size.end(), [](const PinnedBuffer* a, const PinnedBuffer* b) {
    return a->numel * static_cast<int64_t>(c10::elementSize(a->dtype)) >
           b->numel * static_cast<int64_t>(c10::elementSize(b->dtype));
  });
  for (const PinnedBuffer* planned : by_size) {
    const PinnedBuffer& buffer = *planned;
    if (tier->buffers_.count(buffer.what))
      throw Error(internal_error("pinned buffer '" + buffer.what + "' planned twice"));
    const uint64_t bytes = static_cast<uint64_t>(buffer.numel) * c10::elementSize(buffer.dtype);
    at::TensorOptions options = at::TensorOptions().dtype(buffer.dtype).device(at::kCPU);
    if (bytes == 0) {
      tier->buffers_[buffer.what] = at::empty({0}, options);
      continue;
    }
    void* data = value_or_throw(tier->pool_->allocate(bytes));
    zero_fill(data, bytes);
    tier->buffers_[buffer.what] = at::from_blob(data, {buffer.numel}, options);
  }
  return tier;
}

HostTier::~HostTier() {
  buffers_.clear();  // the tensors do not own their memory; the pool frees it
}

at::Tensor HostTier::buffer(const std::string& what) const {
  auto it = buffers_.find(what);
  if (it == buffers_.end()) throw Error(internal_error("pinned buffer '" + what + "' was not planned"));
  return it->second;
}

int64_t HostTier::pinned_bytes() const { return pool_->gpu_pinned() ? static_cast<int64_t>(pool_->capacity()) : 0; }

int64_t HostTier::bytes() const { return static_cast<int64_t>(pool_->capacity()); }

std::string HostTier::description() const { return pool_->description(); }

}  // namespace tierzero::offload
