// Private: reads a ConsolidationSource's tensors in order on a background thread, into a ring of
// memory allocated once, a bounded number of bytes ahead of the consumer: floating-point tensors
// as fp32, integer tensors as their stored bytes (see ConsolidationSource::dtype).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "checkpoint/consolidation_source.h"

namespace tierzero::checkpoint {

// One tensor read ahead: `bytes` bytes at data (fp32 values, or the raw bytes of an integer
// tensor), 64-byte aligned, inside the prefetcher's ring until recycled.
struct PrefetchedTensor {
  const std::byte* data = nullptr;
  uint64_t bytes = 0;
};

class TensorPrefetcher {
 public:
  // Allocates the ring (max(budget_bytes, the largest tensor's bytes)) and starts reading tensors
  // 0, 1, ... of `source` into it. Memory is reused in place from the second pass on: fresh pages
  // would each cost a page fault (a quarter of convert's CPU when every tensor had its own buffer).
  TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes);
  // Stops the reader (after its current tensor) and joins it.
  ~TensorPrefetcher();
  TensorPrefetcher(const TensorPrefetcher&) = delete;
  TensorPrefetcher& operator=(const TensorPrefetcher&) = delete;

  // The next tensor, in order; the first read error ends the stream with it.
  Result<PrefetchedTensor> next();
  // Frees the oldest tensor next() returned that is not yet recycled (tensors are handed back in
  // the order they came), so the reader can fill its bytes again.
  void recycle();

 private:
  // A ring region for the next tensor's `bytes` (waits for room); offset into ring_, or
  // UINT64_MAX once stopped.
  uint64_t allocate(uint64_t bytes);
  void run();
  // Reads tensor `index` (`bytes` bytes: fp32 values or the stored integer bytes) to `data`.
  Status read(size_t index, std::byte* data, uint64_t bytes);

  struct FreeBytes {
    void operator()(std::byte* p) const;
  };
  ConsolidationSource& source_;
  uint64_t ring_bytes_;
  std::unique_ptr<std::byte[], FreeBytes> ring_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t head_ = 0;  // where the next region starts
  uint64_t used_ = 0;  // bytes held by regions not yet recycled, skipped ends of the ring included
  std::deque<uint64_t> regions_;         // sizes of the held regions, oldest first
  std::deque<PrefetchedTensor> ready_;   // read, not yet taken by next()
  Status error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierzero::checkpoint
