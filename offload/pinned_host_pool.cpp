// PinnedHostPool: an ArenaPool over one pinned arena, locked for use from several threads.
#include <algorithm>
#include <mutex>
#include <optional>

#include "common/common.h"
#include "offload/internal/arena_pool.h"
#include "offload/internal/device_memory.h"
#include "offload/internal/host_facts.h"
#include "offload/offload.h"

namespace tierzero::offload {

struct PinnedHostPool::Impl {
  PinnedPoolOptions options;
  std::unique_ptr<DeviceMemory> device;
  std::optional<ArenaPool> pool;  // destroyed before `device`, which frees its arena
  mutable std::mutex mutex;
};

PinnedHostPool::PinnedHostPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PinnedHostPool::~PinnedHostPool() = default;

uint64_t PinnedHostPool::footprint(uint64_t bytes) {
  return RangeAllocator::round_up(bytes, ArenaPool::block_alignment(bytes));
}

uint64_t pinned_capacity(const std::vector<PinnedBufferSpec>& buffers) {
  uint64_t capacity = 0;
  for (const PinnedBufferSpec& buffer : buffers)
    if (buffer.bytes > 0) capacity += PinnedHostPool::footprint(buffer.bytes);
  // A whole number of pages: the pool's top end is then aligned for any small block placed there.
  return (capacity + 4095) / 4096 * 4096;
}

const char* pinned_role_name(PinnedRole role) {
  switch (role) {
    case PinnedRole::kOptimizerSwapBuffer: return "nvme optimizer buffer";
    case PinnedRole::kOptimizerRecords: return "optimizer records kept in pinned memory";
    case PinnedRole::kGradients: return "gradients";
    case PinnedRole::kGradStaging: return "gradient staging";
    case PinnedRole::kWeights16: return "16-bit weights";
    case PinnedRole::kParamReadBuffer: return "nvme parameter buffer";
    case PinnedRole::kParamWindow: return "nvme parameter window";
    case PinnedRole::kParamRecords: return "parameters kept in host memory (offload_param.max_in_cpu)";
    case PinnedRole::kParamShard: return "parameter shard";
    case PinnedRole::kFrozenWeight: return "frozen base weight";
    case PinnedRole::kFrozenStaging: return "frozen base staging half";
  }
  return "pinned buffer";
}

Result<std::unique_ptr<PinnedHostPool>> PinnedHostPool::create(const PinnedPoolOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  TZ_ASSIGN_OR_RETURN(impl->device, make_device_memory(options.device, options.cuda_device));
  TZ_ASSIGN_OR_RETURN(HostFacts facts, read_host_facts());
  const uint64_t capacity = options.capacity_bytes;
  if (capacity > facts.mem_available) {
    return out_of_space("pinned host pool of " + format_bytes(capacity) + " exceeds MemAvailable " +
                        format_bytes(facts.mem_available) + "; free host memory or offload less");
  }
  const bool mlocked = !impl->device->is_gpu() && options.lock_host_memory;
  if (mlocked && !facts.can_lock_unlimited && capacity > facts.memlock_limit) {
    return resource_exhausted("pinned host pool of " + format_bytes(capacity) + " exceeds RLIMIT_MEMLOCK " +
                              describe_memlock(facts) + "; raise it (ulimit -l unlimited) or do not lock host memory");
  }
  DeviceMemory* device = impl->device.get();
  const bool lock = options.lock_host_memory;
  Result<ArenaPool> pool = ArenaPool::create(
      capacity, [device, lock](uint64_t n) { return device->allocate_pinned(n, lock); },
      [device](void* p, uint64_t n) { device->free_pinned(p, n); });
  if (!pool.ok()) return pool.status().with_context("pinned host pool of " + format_bytes(capacity));
  impl->pool.emplace(std::move(pool).value());
  return std::unique_ptr<PinnedHostPool>(new PinnedHostPool(std::move(impl)));
}

Result<void*> PinnedHostPool::allocate(uint64_t bytes) {
  if (bytes == 0) return invalid_argument("pinned host pool: a block of 0 bytes was asked for");
  std::lock_guard lock(impl_->mutex);
  std::optional<Block> block = impl_->pool->allocate(bytes);
  if (!block) {
    return out_of_space("pinned host pool: no room for " + format_bytes(bytes) + " (" +
                        format_bytes(impl_->pool->used()) + " of " + format_bytes(impl_->options.capacity_bytes) +
                        " used); the budget computed at start-up missed a buffer");
  }
  return block->data;
}

bool PinnedHostPool::gpu_pinned() const { return impl_->device->is_gpu(); }

uint64_t PinnedHostPool::capacity() const { return impl_->options.capacity_bytes; }

uint64_t PinnedHostPool::used() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->pool->used();
}

std::string PinnedHostPool::description() const {
  return format_bytes(capacity()) + " pinned (" + (gpu_pinned() ? "huge pages registered with CUDA" : "host memory") +
         ") for " + impl_->device->description();
}

}  // namespace tierzero::offload
