#include "offload/internal/arena_pool.h"

#include <algorithm>
#include <bit>

namespace tierzero::offload {

Result<ArenaPool> ArenaPool::create(uint64_t capacity, const ArenaAllocator& allocate, ArenaFreer free) {
  ArenaPool pool(capacity);
  if (capacity == 0) return pool;
  TZ_ASSIGN_OR_RETURN(void* data, allocate(capacity));
  pool.arena_ = std::unique_ptr<std::byte, Freer>(static_cast<std::byte*>(data), Freer{std::move(free), capacity});
  return pool;
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
  // Large blocks fill the arena from its bottom, small ones from its top.
  const std::optional<uint64_t> offset =
      align >= kLargeAlign ? range_.allocate(bytes, align) : range_.allocate_high(bytes, align);
  if (!offset) return std::nullopt;
  return Block{arena_.get() + *offset, *offset, bytes, align};
}

void ArenaPool::free(const Block& block) { range_.free(block.offset, block.bytes, block.align); }

}  // namespace tierzero::offload
