// STREAM-style memory bandwidth for `tierzero bench adam`, measured on the same threads as the
// optimizer (McCalpin's STREAM counts copy as 8 and triad as 12 bytes per float; write-allocate
// traffic is not counted, as in STREAM).
#pragma once

#include <cstddef>

#include <tbb/task_arena.h>

namespace tierzero::tools {

// Copy and triad passes over `count` floats of a, b, c on `threads` threads, statically split as
// cpu_adam splits its tiles. Each call runs one pass and returns its bytes per second.
class StreamPasses {
 public:
  StreamPasses(int threads, float* a, float* b, float* c, size_t count);
  double copy();   // c[i] = a[i]
  double triad();  // a[i] = b[i] + 3 * c[i]

 private:
  tbb::task_arena arena_;
  float* a_;
  float* b_;
  float* c_;
  size_t count_;
};

}  // namespace tierzero::tools
