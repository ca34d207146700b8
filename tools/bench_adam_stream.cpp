#include "tools/bench_adam_stream.h"

#include <chrono>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>

namespace tierzero::tools {
namespace {

// Runs body over [0, count) in ranges of 64 Ki elements handed to the arena's threads as each becomes
// free: the schedule CpuAdam's own passes use (cpu_adam/README.md, "Threads"), so that the reference
// does not lose to a thread without its core what the measured step does not.
template <class Body>
double timed_pass(tbb::task_arena& arena, size_t count, const Body& body) {
  const auto start = std::chrono::steady_clock::now();
  arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, count, 65536),
        [&](const tbb::blocked_range<size_t>& r) { body(r.begin(), r.end()); }, tbb::simple_partitioner());
  });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

StreamPasses::StreamPasses(int threads, float* a, float* b, float* c, size_t count)
    : arena_(threads), a_(a), b_(b), c_(c), count_(count) {}

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

}  // namespace tierzero::tools
