// Private: reads a ConsolidationSource's tensors in order, in pieces, on a background thread, into
// a ring of memory allocated once, a bounded number of bytes ahead of the consumer: floating-point
// tensors as fp32 ranges of at most the piece size, integer tensors whole as their stored bytes
// (see ConsolidationSource::dtype).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "checkpoint/convert/consolidate.h"

namespace tierzero::checkpoint {

// One piece read ahead: `bytes` bytes at data, the next elements of tensor `index` (fp32 values,
// or all the raw bytes of an integer tensor), 64-byte aligned, inside the prefetcher's ring until
// recycled. `last`: the tensor's final piece (a tensor of no elements has one empty piece).
struct PrefetchedPiece {
  size_t index = 0;
  const std::byte* data = nullptr;
  uint64_t bytes = 0;
  bool last = false;
};

class TensorPrefetcher {
 public:
  // Allocates the ring (max(budget_bytes, piece_bytes, the largest integer tensor)) and starts
  // reading tensors 0, 1, ... of `source` into it, floating-point ones in pieces of at most
  // `piece_bytes` (a multiple of 64). Memory is reused in place from the second pass on, and its
  // size does not grow with the model's largest tensor.
  TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes, uint64_t piece_bytes);
  // Stops the reader (after its current piece) and joins it.
  ~TensorPrefetcher();
  TensorPrefetcher(const TensorPrefetcher&) = delete;
  TensorPrefetcher& operator=(const TensorPrefetcher&) = delete;

  // The next piece, in order; the first read error ends the stream with it.
  Result<PrefetchedPiece> next();
  // Frees the oldest piece next() returned that is not yet recycled (pieces are handed back in
  // the order they came), so the reader can fill its bytes again.
  void recycle();

 private:
  // A ring region for the next piece's `bytes` (waits for room); offset into ring_, or
  // UINT64_MAX once stopped.
  uint64_t allocate(uint64_t bytes);
  void run();
  // Reads and queues tensor `index`'s pieces; false once stopped or failed.
  bool read_tensor(size_t index);
  // Queues `piece` when `read` (how reading it went) is ok, else ends the stream with that error;
  // returns read.ok().
  bool publish(Status read, PrefetchedPiece piece);

  struct FreeBytes {
    void operator()(std::byte* p) const;
  };
  ConsolidationSource& source_;
  uint64_t piece_bytes_;
  uint64_t ring_bytes_;
  std::unique_ptr<std::byte[], FreeBytes> ring_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t head_ = 0;                  // where the next region starts
  uint64_t used_ = 0;                  // bytes held by regions not yet recycled, skipped ends of the ring included
  std::deque<uint64_t> regions_;       // sizes of the held regions, oldest first
  std::deque<PrefetchedPiece> ready_;  // read, not yet taken by next()
  Status error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tierzero::checkpoint
