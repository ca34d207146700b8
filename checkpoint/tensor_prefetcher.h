// Private: reads a ConsolidationSource's tensors in order on a background thread, a bounded
// number of bytes ahead of the consumer: floating-point tensors as fp32, integer tensors as their
// stored bytes (see ConsolidationSource::dtype).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/consolidation_source.h"

namespace tierzero::checkpoint {

// One tensor read ahead: `bytes` bytes at data (fp32 values, or the raw bytes of an integer tensor).
struct PrefetchedTensor {
  std::unique_ptr<std::byte[]> data;
  uint64_t bytes = 0;
  uint64_t capacity = 0;  // bytes allocated at data
};

class TensorPrefetcher {
 public:
  // Starts reading tensors 0, 1, ... of `source`, keeping at most `budget_bytes` of data queued
  // (always at least one tensor).
  TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes);
  // Stops the reader (after its current tensor) and joins it.
  ~TensorPrefetcher();
  TensorPrefetcher(const TensorPrefetcher&) = delete;
  TensorPrefetcher& operator=(const TensorPrefetcher&) = delete;

  // The next tensor, in order; the first read error ends the stream with it.
  Result<PrefetchedTensor> next();
  // Hands back a tensor from next() for reuse of its buffer: fresh allocations of large tensors
  // cost a page fault per 4 KiB, which reuse avoids. The pool keeps up to `budget_bytes` more.
  void recycle(PrefetchedTensor tensor);

 private:
  void run();
  // Reads tensor `index` (numel elements) into a buffer from the pool or a new one.
  Result<PrefetchedTensor> read(size_t index, uint64_t numel);
  // A recycled buffer of at least `bytes` bytes (removed from the pool), or a new one.
  PrefetchedTensor take_buffer(uint64_t bytes);
  ConsolidationSource& source_;
  uint64_t budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<PrefetchedTensor> ready_;
  uint64_t queued_bytes_ = 0;
  std::vector<PrefetchedTensor> pool_;
  uint64_t pool_bytes_ = 0;
  Status error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierzero::checkpoint
