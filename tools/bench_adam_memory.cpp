#include "tools/bench_adam_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <span>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include "common/common.h"

namespace tierzero::tools {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

void HostArray::Free::operator()(void* p) const { std::free(p); }

HostArray::HostArray(size_t bytes) : bytes_(bytes) {
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded == 0 ? kHugePage : rounded);
  if (p == nullptr) throw std::bad_alloc();
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: fewer TLB misses when the kernel allows it
  data_.reset(p);
}

void parallel_ranges(int threads, size_t count, const std::function<void(size_t, size_t)>& body) {
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, count, 4096),
        [&](const tbb::blocked_range<size_t>& r) { body(r.begin(), r.end()); }, tbb::static_partitioner());
  });
}

void fill_uniform(int threads, void* data, ElementType type, size_t count, uint64_t seed, float lo, float hi) {
  parallel_ranges(threads, count, [&](size_t begin, size_t end) {
    constexpr size_t kChunk = 4096;  // values drawn, then stored (16-bit: rounded to nearest even)
    float values[kChunk];
    for (size_t first = begin; first < end; first += kChunk) {
      const size_t n = std::min(kChunk, end - first);
      for (size_t i = 0; i < n; ++i) {
        const float unit = static_cast<float>(splitmix64(seed * 0x100000001B3ull + first + i) >> 40) * 0x1p-24f;
        values[i] = lo + (hi - lo) * unit;
      }
      if (type == ElementType::kF32) {
        std::memcpy(static_cast<float*>(data) + first, values, n * sizeof(float));
      } else {
        (type == ElementType::kBF16 ? floats_to_bf16 : floats_to_fp16)(std::span(values, n),
                                                                       static_cast<uint16_t*>(data) + first);
      }
    }
  });
}

}  // namespace tierzero::tools
