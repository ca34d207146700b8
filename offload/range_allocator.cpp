#include "offload/internal/range_allocator.h"

#include <algorithm>
#include <cassert>

namespace tierzero::offload {

RangeAllocator::RangeAllocator(uint64_t capacity) {
  if (capacity > 0) free_.emplace(0, capacity);
}

std::optional<uint64_t> RangeAllocator::allocate(uint64_t bytes, uint64_t align) {
  const uint64_t size = round_up(std::max<uint64_t>(bytes, 1), align);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = round_up(it->first, align);
    if (start + size > it->first + it->second) continue;
    return take(it, start, size);
  }
  return std::nullopt;
}

std::optional<uint64_t> RangeAllocator::allocate_high(uint64_t bytes, uint64_t align) {
  const uint64_t size = round_up(std::max<uint64_t>(bytes, 1), align);
  for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
    if (it->second < size) continue;
    const uint64_t start = (it->first + it->second - size) & ~(align - 1);
    if (start < it->first) continue;
    return take(std::prev(it.base()), start, size);
  }
  return std::nullopt;
}

uint64_t RangeAllocator::take(std::map<uint64_t, uint64_t>::iterator range, uint64_t start, uint64_t size) {
  const uint64_t range_start = range->first;
  const uint64_t end = range->first + range->second;
  free_.erase(range);
  if (start > range_start) free_.emplace(range_start, start - range_start);
  if (start + size < end) free_.emplace(start + size, end - start - size);
  used_ += size;
  return start;
}

void RangeAllocator::free(uint64_t offset, uint64_t bytes, uint64_t align) {
  const uint64_t size = round_up(std::max<uint64_t>(bytes, 1), align);
  assert(used_ >= size);
  used_ -= size;
  insert_free(offset, size);
}

void RangeAllocator::insert_free(uint64_t offset, uint64_t bytes) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + bytes == next->first) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += bytes;
      return;
    }
  }
  free_.emplace(offset, bytes);
}

}  // namespace tierzero::offload
