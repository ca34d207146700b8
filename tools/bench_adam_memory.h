// Host memory for `tierzero bench adam`: page-aligned arrays placed by first touch from the
// threads that later use them, filled with reproducible pseudo-random values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "cpu_adam/adam.h"

namespace tierzero::tools {

// `bytes` of uninitialised, 2 MiB-aligned host memory (transparent huge pages where allowed).
class HostArray {
 public:
  explicit HostArray(size_t bytes);
  void* data() const { return data_.get(); }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> data_;
  size_t bytes_;
};

// Runs body(begin, end) over [0, count) on `threads` threads, split statically into one range
// per thread, as cpu_adam splits its tiles, so pages are first touched by the thread that uses them.
void parallel_ranges(int threads, size_t count, const std::function<void(size_t, size_t)>& body);

// Fills `count` elements of `type` at `data`: uniform in [lo, hi), from `seed` and the index only
// (the same values for any thread count), rounded to nearest even for 16-bit types.
void fill_uniform(int threads, void* data, ElementType type, size_t count, uint64_t seed, float lo, float hi);

}  // namespace tierzero::tools
