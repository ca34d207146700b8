#include "offload/internal/arena_pool.h"

#include <algorithm>
#include <bit>

namespace tierzero::offload {

Result<ArenaPool> ArenaPool::create(uint64_t capacity, uint64_t arena_bytes, const ArenaAllocator& allocate,
                                    ArenaFreer free) {
  ArenaPool pool;
  pool.capacity_ = capacity;
  pool.free_ = std::move(free);
  if (arena_bytes == 0) arena_bytes = capacity;
  for (uint64_t placed = 0; placed < capacity;) {
    const uint64_t bytes = std::min(arena_bytes, capacity - placed);
    Result<void*> data = allocate(bytes);
    if (!data.ok()) {
      return data.status().with_context("arena " + std::to_string(pool.arenas_.size()) + " of the pool (" +
                                        std::to_string(placed) + " bytes placed before)");
    }
    pool.arenas_.push_back({*data, bytes});
    pool.ranges_.emplace_back(bytes);
    placed += bytes;
  }
  return pool;
}

ArenaPool::~ArenaPool() {
  if (!free_) return;
  for (const Arena& a : arenas_) free_(a.data, a.bytes);
}

namespace {
constexpr uint64_t kLargeAlign = 4096;
}  // namespace

uint64_t ArenaPool::block_alignment(uint64_t bytes) {
  if (bytes >= (80u << 10)) return kLargeAlign;
  return std::clamp<uint64_t>(std::bit_floor(bytes / 32), 16, 256);
}

std::optional<Block> ArenaPool::allocate(uint64_t bytes) {
  const uint64_t align = block_alignment(bytes);
  const uint32_t n = static_cast<uint32_t>(arenas_.size());
  for (uint32_t k = 0; k < n; ++k) {
    // Large blocks fill the arenas from the first one's bottom, small ones from the last one's top.
    const uint32_t i = align >= kLargeAlign ? k : n - 1 - k;
    std::optional<uint64_t> offset =
        align >= kLargeAlign ? ranges_[i].allocate(bytes, align) : ranges_[i].allocate_high(bytes, align);
    if (offset) return Block{static_cast<std::byte*>(arenas_[i].data) + *offset, i, *offset, bytes, align};
  }
  return std::nullopt;
}

void ArenaPool::free(const Block& block) { ranges_[block.arena].free(block.offset, block.bytes, block.align); }

uint64_t ArenaPool::used() const {
  uint64_t sum = 0;
  for (const RangeAllocator& r : ranges_) sum += r.used();
  return sum;
}

}  // namespace tierzero::offload
