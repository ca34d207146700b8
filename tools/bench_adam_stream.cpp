#include "tools/bench_adam_stream.h"

#include <bit>
#include <chrono>
#include <cstdint>
#include <type_traits>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

namespace tierzero::tools {
namespace {

template <class Body>
double timed_pass(tbb::task_arena& arena, size_t count, const Body& body) {
  const auto start = std::chrono::steady_clock::now();
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, count, 16384),
        [&](const tbb::blocked_range<size_t>& r) { body(r.begin(), r.end()); }, tbb::static_partitioner());
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Elements of 4 bytes are floats, of 2 bytes 16-bit bits. A 16-bit gradient is widened as bf16 (a
// shift); 16-bit p, m and v get 1 added to their bits and are never converted: narrowing 32-bit lanes
// to 16 takes SSE2 several shuffles per vector, which left a pass with bf16 m, v 52 GB/s per core in
// cache on the CI box, barely above the ~45 GB/s one core gets from memory (138 GB/s without).
template <int Bytes>
using Element = std::conditional_t<Bytes == 4, float, uint16_t>;

float widen(float x) { return x; }
float widen(uint16_t bf16) { return std::bit_cast<float>(uint32_t{bf16} << 16); }

float bump(float x, float g) { return x + g; }
uint16_t bump(uint16_t bits, float) { return static_cast<uint16_t>(bits + 1); }

// The 16-bit copy of p: truncated to bf16 from fp32 (no rounding), as is from 16 bits.
uint16_t to_16bit(float x) { return static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16); }
uint16_t to_16bit(uint16_t bits) { return bits; }

// Seconds of one roofline pass at these element sizes (GCC vectorises every instantiation, 16-byte
// vectors on the baseline x86-64 target: -fopt-info-vec).
template <int ParamBytes, int GradBytes, int StateBytes, bool Write16>
double adam_shape_seconds(tbb::task_arena& arena, size_t count, const AdamShapeBuffers& b) {
  using P = Element<ParamBytes>;
  using S = Element<StateBytes>;
  return timed_pass(arena, count, [&b](size_t begin, size_t end) {
    P* p = static_cast<P*>(b.params);
    const Element<GradBytes>* g = static_cast<const Element<GradBytes>*>(b.grads);
    S* m = static_cast<S*>(b.exp_avg);
    S* v = static_cast<S*>(b.exp_avg_sq);
    uint16_t* p16 = static_cast<uint16_t*>(b.params16);
    for (size_t i = begin; i < end; ++i) {
      const float gi = widen(g[i]);
      p[i] = bump(p[i], gi);
      m[i] = bump(m[i], gi);
      v[i] = bump(v[i], gi);
      if constexpr (Write16) p16[i] = to_16bit(p[i]);
    }
  });
}

// Calls f(std::integral_constant<int, 2 or 4>) for an element size of `bytes`.
template <class F>
double with_element_bytes(int bytes, const F& f) {
  return bytes == 2 ? f(std::integral_constant<int, 2>{}) : f(std::integral_constant<int, 4>{});
}

}  // namespace

StreamPasses::StreamPasses(int threads, float* a, float* b, float* c, size_t count, const AdamShapeBuffers& adam)
    : arena_(threads), a_(a), b_(b), c_(c), count_(count), adam_(adam) {}

double StreamPasses::copy() {
  const double seconds = timed_pass(arena_, count_, [this](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) c_[i] = a_[i];
  });
  return 8.0 * static_cast<double>(count_) / seconds;
}

double StreamPasses::triad() {
  const double seconds = timed_pass(arena_, count_, [this](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) a_[i] = b_[i] + 3.0f * c_[i];
  });
  return 12.0 * static_cast<double>(count_) / seconds;
}

double StreamPasses::adam_roofline() {
  const double seconds = with_element_bytes(adam_.params_bytes, [&](auto p) {
    return with_element_bytes(adam_.grads_bytes, [&](auto g) {
      return with_element_bytes(adam_.state_bytes, [&](auto s) {
        constexpr int P = decltype(p)::value, G = decltype(g)::value, S = decltype(s)::value;
        return adam_.params16 != nullptr ? adam_shape_seconds<P, G, S, true>(arena_, count_, adam_)
                                         : adam_shape_seconds<P, G, S, false>(arena_, count_, adam_);
      });
    });
  });
  return adam_.bytes_per_param * static_cast<double>(count_) / seconds;
}

}  // namespace tierzero::tools
