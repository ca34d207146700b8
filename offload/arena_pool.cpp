#include "offload/arena_pool.h"

#include <algorithm>

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

uint64_t ArenaPool::block_alignment(uint64_t bytes) { return bytes >= (80u << 10) ? 4096 : 256; }

std::optional<Block> ArenaPool::allocate(uint64_t bytes) {
  const uint64_t align = block_alignment(bytes);
  for (uint32_t i = 0; i < arenas_.size(); ++i) {
    if (std::optional<uint64_t> offset = ranges_[i].allocate(bytes, align)) {
      return Block{static_cast<std::byte*>(arenas_[i].data) + *offset, i, *offset, bytes};
    }
  }
  return std::nullopt;
}

void ArenaPool::free(const Block& block) {
  ranges_[block.arena].free(block.offset, block.bytes, block_alignment(block.bytes));
}

uint64_t ArenaPool::used() const {
  uint64_t sum = 0;
  for (const RangeAllocator& r : ranges_) sum += r.used();
  return sum;
}

}  // namespace tierzero::offload
