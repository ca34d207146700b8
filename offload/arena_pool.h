// A memory tier's pool: a few large arenas carved into exact-size blocks (sizes rounded only to
// the block alignment, so the overhead stays under 5% for blocks of 5 KiB and more, where a
// power-of-two caching allocator can waste half). Not thread-safe; the tier manager locks.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/status.h"
#include "offload/range_allocator.h"

namespace tierzero::offload {

struct Block {
  void* data = nullptr;
  uint32_t arena = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // as asked
};

class ArenaPool {
 public:
  // Allocates arena memory of the given size, or an error with the numbers.
  using ArenaAllocator = std::function<Result<void*>(uint64_t bytes)>;
  using ArenaFreer = std::function<void(void* data, uint64_t bytes)>;

  struct Arena {
    void* data;
    uint64_t bytes;
  };

  // Allocates ceil(capacity / arena_bytes) arenas summing to exactly `capacity` bytes.
  static Result<ArenaPool> create(uint64_t capacity, uint64_t arena_bytes, const ArenaAllocator& allocate,
                                  ArenaFreer free);
  ArenaPool(ArenaPool&&) = default;
  ArenaPool& operator=(ArenaPool&&) = default;
  ~ArenaPool();

  // The alignment of a block of `bytes`: 4096 (O_DIRECT) from 80 KiB up, else 256, so rounding
  // adds at most 5% to blocks of 5 KiB and more.
  static uint64_t block_alignment(uint64_t bytes);

  // A block of exactly `bytes` (plus alignment rounding), or nullopt when no arena has room.
  std::optional<Block> allocate(uint64_t bytes);
  void free(const Block& block);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const;
  const std::vector<Arena>& arenas() const { return arenas_; }

 private:
  ArenaPool() = default;

  uint64_t capacity_ = 0;
  std::vector<Arena> arenas_;
  std::vector<RangeAllocator> ranges_;
  ArenaFreer free_;
};

}  // namespace tierzero::offload
