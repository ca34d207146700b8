// Aligned allocations for O_DIRECT buffers: pages for small ones, transparent huge pages for large.
#include <sys/mman.h>

#include <cstdlib>
#include <new>

#include "nvme/io_engine.h"

namespace tierzero::nvme {

namespace {

constexpr uint64_t kBufferAlign = 4096;

uint64_t round_up(uint64_t bytes, uint64_t align) { return (bytes + align - 1) / align * align; }

}  // namespace

void AlignedFree::operator()(void* p) const { std::free(p); }

AlignedBuffer allocate_aligned(uint64_t bytes) {
  const bool huge = bytes >= kHugeBufferAlign;
  const uint64_t align = huge ? kHugeBufferAlign : kBufferAlign;
  const uint64_t rounded = round_up(bytes == 0 ? 1 : bytes, align);
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  // Advice only: where THP is off (or the kernel has no huge page free) the range stays on 4 KiB pages.
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
  return AlignedBuffer(static_cast<std::byte*>(p));
}

}  // namespace tierzero::nvme
