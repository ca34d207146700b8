// copy_in_parallel (storage.h): a save's copy of the state into its staging buffers, slice by slice
// on the arena's threads, so the copy is not one core's memcpy rate.
#include <algorithm>
#include <cstring>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {

void copy_in_parallel(std::span<std::byte> dst, std::span<const std::byte> src) {
  const size_t bytes = src.size();
  const size_t slices = (bytes + kCopySlice - 1) / kCopySlice;
  if (slices < 2) {
    if (bytes > 0) std::memcpy(dst.data(), src.data(), bytes);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<size_t>(0, slices, 1), [&](const tbb::blocked_range<size_t>& range) {
    const size_t begin = range.begin() * kCopySlice;
    const size_t end = std::min(bytes, range.end() * kCopySlice);
    std::memcpy(dst.data() + begin, src.data() + begin, end - begin);
  });
}

}  // namespace tierzero::checkpoint
