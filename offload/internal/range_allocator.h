// First-fit allocator of offsets in [0, capacity): exact sizes rounded only to an alignment,
// neighbouring free ranges coalesced on free: an ArenaPool's arena. Not thread-safe; the owner locks.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace tierzero::offload {

class RangeAllocator {
 public:
  explicit RangeAllocator(uint64_t capacity);

  // Returns the offset of a free range of `bytes` (rounded up to `align`, a power of two) whose
  // start is a multiple of `align`, or nullopt when no free range is large enough.
  std::optional<uint64_t> allocate(uint64_t bytes, uint64_t align);
  // As allocate(), but the highest-placed fit: a range that ends as close to the end of the
  // highest free range that can hold it as `align` allows. Used to keep small blocks packed at
  // the top of an arena, away from the large blocks placed first-fit from the bottom.
  std::optional<uint64_t> allocate_high(uint64_t bytes, uint64_t align);
  // Returns a range given by allocate() with the same `bytes` and `align`.
  void free(uint64_t offset, uint64_t bytes, uint64_t align);

  uint64_t used() const { return used_; }

  // Rounds `bytes` up to a multiple of `align` (a power of two).
  static uint64_t round_up(uint64_t bytes, uint64_t align) { return (bytes + align - 1) & ~(align - 1); }

 private:
  void insert_free(uint64_t offset, uint64_t bytes);
  // Takes [start, start + size) out of the free range at `range` and returns `start`.
  uint64_t take(std::map<uint64_t, uint64_t>::iterator range, uint64_t start, uint64_t size);

  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> length, disjoint and never adjacent
};

}  // namespace tierzero::offload
