// Private: reads a ConsolidationSource's tensors in order on a background thread, a bounded
// number of bytes ahead of the consumer.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "checkpoint/consolidation_source.h"

namespace tierzero::checkpoint {

class TensorPrefetcher {
 public:
  // Starts reading tensors 0, 1, ... of `source`, keeping at most `budget_bytes` of fp32 data
  // queued (always at least one tensor).
  TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes);
  // Stops the reader (after its current tensor) and joins it.
  ~TensorPrefetcher();
  TensorPrefetcher(const TensorPrefetcher&) = delete;
  TensorPrefetcher& operator=(const TensorPrefetcher&) = delete;

  // The next tensor's fp32 data, in order; the first read error ends the stream with it.
  Result<std::unique_ptr<float[]>> next();
  // Hands back a buffer from next() holding `numel` floats, for reuse: fresh allocations of
  // large tensors cost a page fault per 4 KiB, which reuse avoids. Kept only within the budget.
  void recycle(std::unique_ptr<float[]> data, uint64_t numel);

 private:
  void run();
  // A recycled buffer of at least `numel` floats (removed from the pool), or a new one.
  std::unique_ptr<float[]> take_buffer(uint64_t numel);
  ConsolidationSource& source_;
  uint64_t budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::unique_ptr<float[]>, uint64_t>> ready_;  // data, bytes
  uint64_t queued_bytes_ = 0;
  std::vector<std::pair<std::unique_ptr<float[]>, uint64_t>> pool_;  // data, capacity in floats
  uint64_t pool_bytes_ = 0;
  Status error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierzero::checkpoint
