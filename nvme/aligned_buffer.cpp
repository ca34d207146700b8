// Page-aligned allocations for O_DIRECT buffers.
#include <cstdlib>
#include <new>

#include "nvme/io_engine.h"

namespace tierzero::nvme {

namespace {
constexpr uint64_t kBufferAlign = 4096;
}

void AlignedFree::operator()(void* p) const { std::free(p); }

AlignedBuffer allocate_aligned(uint64_t bytes) {
  const uint64_t rounded = ((bytes == 0 ? 1 : bytes) + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  void* p = std::aligned_alloc(kBufferAlign, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return AlignedBuffer(static_cast<std::byte*>(p));
}

}  // namespace tierzero::nvme
