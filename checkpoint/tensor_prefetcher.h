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

 private:
  void run();
  ConsolidationSource& source_;
  uint64_t budget_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::unique_ptr<float[]>, uint64_t>> ready_;  // data, bytes
  uint64_t queued_bytes_ = 0;
  Status error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierzero::checkpoint
