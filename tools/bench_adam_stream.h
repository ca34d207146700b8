// STREAM-style memory bandwidth for `tierzero bench adam`, measured on the same threads as the
// optimizer (McCalpin's STREAM counts copy as 8 and triad as 12 bytes per float; write-allocate
// traffic is not counted, as in STREAM), and a roofline pass with the memory shape of one Adam step
// (the streams the step reads and writes back in place, with trivial arithmetic).
#pragma once

#include <cstddef>

#include <tbb/task_arena.h>

namespace tierzero::tools {

// Buffers of the roofline pass: `count` elements each (the count given to StreamPasses), of 4 bytes
// (fp32) or 2 bytes (16-bit, whatever the run's 16-bit type, as only the bytes moved matter). A 16-bit
// `grads` is read as bf16; the other 16-bit buffers are never read as floats. The pass writes them,
// so they must not be the optimizer's own buffers.
struct AdamShapeBuffers {
  void* params;
  int params_bytes;  // 4 or 2
  const void* grads;
  int grads_bytes;  // 4 or 2
  void* exp_avg;
  void* exp_avg_sq;
  int state_bytes;         // 4 or 2, of m and v
  void* params16;          // 16-bit copy of params written by the pass; null for none
  double bytes_per_param;  // bytes the caller counts per param for this shape (reads plus writes)
};

// Copy, triad and roofline passes over `count` elements on `threads` threads, statically split as
// cpu_adam splits its tiles. Each call runs one pass and returns its bytes per second.
class StreamPasses {
 public:
  // a, b, c: `count` floats each for copy and triad; `adam`: the roofline's buffers.
  StreamPasses(int threads, float* a, float* b, float* c, size_t count, const AdamShapeBuffers& adam);
  double copy();   // c[i] = a[i]
  double triad();  // a[i] = b[i] + 3 * c[i]
  // p[i] += g[i], m[i] += g[i], v[i] += g[i] in place (16-bit elements: 1 added to their bits), then
  // p16[i] = p[i] if there is a 16-bit copy: the streams of an Adam step at its element sizes with no
  // arithmetic to speak of, so the ceiling for that access pattern. Counts adam.bytes_per_param per
  // element. fp32 elements grow by g each pass, so buffers that start of the order of 1 stay finite.
  double adam_roofline();

 private:
  tbb::task_arena arena_;
  float* a_;
  float* b_;
  float* c_;
  size_t count_;
  AdamShapeBuffers adam_;
};

}  // namespace tierzero::tools
