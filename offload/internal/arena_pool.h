// A memory tier's pool: one large arena carved into exact-size blocks, sizes rounded only to an
// alignment that grows with the block (a power-of-two caching allocator can waste half):
// - large blocks (80 KiB and up) are 4096-aligned, so NVMe I/O into them is O_DIRECT zero-copy,
//   and placed first-fit from the bottom of the arena;
// - small blocks are aligned to bytes/32 rounded down to a power of two, at least 16 (any dtype,
//   128-bit loads) and at most 256 (cudaMemcpy's fast path), and packed from the top of the
//   arena down, so their small alignments strand no gaps between the 4 KiB-aligned large ones.
//   Their NVMe I/O goes through the IoEngine's aligned bounce buffers (nvme/io_engine.h).
// Rounding adds at most 5% to any block of 320 bytes and more, and at most 15 bytes below that.
// Not thread-safe; PinnedHostPool locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "common/common.h"
#include "offload/internal/range_allocator.h"

namespace tierzero::offload {

struct Block {
  void* data = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;  // as asked
  uint64_t align = 0;  // its start is a multiple of this, its size rounded up to one
};

class ArenaPool {
 public:
  // Allocates arena memory of the given size, or an error with the numbers.
  using ArenaAllocator = std::function<Result<void*>(uint64_t bytes)>;
  using ArenaFreer = std::function<void(void* data, uint64_t bytes)>;

  // Allocates one arena of exactly `capacity` bytes (none when 0: no block fits), given back to
  // `free` when the pool is destroyed; allocate's error.
  static Result<ArenaPool> create(uint64_t capacity, const ArenaAllocator& allocate, ArenaFreer free);

  // The alignment of a block of `bytes`: 4096 from 80 KiB up, else bit_floor(bytes / 32)
  // clamped to [16, 256] (see the comment at the top).
  static uint64_t block_alignment(uint64_t bytes);

  // A block of exactly `bytes` at block_alignment(bytes) (its size rounded up to it), or nullopt
  // when the arena has no room.
  std::optional<Block> allocate(uint64_t bytes);
  // Returns a block given by allocate().
  void free(const Block& block);

  uint64_t capacity() const { return capacity_; }
  // Bytes taken by blocks, rounding included: the pool's overhead is used() minus the bytes asked.
  uint64_t used() const { return range_.used(); }

 private:
  // Gives the arena back to its freer.
  struct Freer {
    ArenaFreer free;
    uint64_t bytes;
    void operator()(std::byte* data) const { free(data, bytes); }
  };
  explicit ArenaPool(uint64_t capacity) : capacity_(capacity), range_(capacity) {}

  uint64_t capacity_;
  std::unique_ptr<std::byte, Freer> arena_;  // null when capacity_ is 0
  RangeAllocator range_;
};

}  // namespace tierzero::offload
