// The submission/completion loop shared by the io_uring and libaio lanes.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "nvme/internal/piece_queue.h"
#include "nvme/io_engine.h"

namespace tierzero::nvme {

struct RawCompletion {
  Piece* piece;
  int64_t result;  // bytes, or -errno
};

// One kernel queue (an io_uring ring or a libaio context), used only by its lane's thread.
class AsyncDriver {
 public:
  virtual ~AsyncDriver() = default;
  // Stages the piece's current transfer without a system call; the lane never stages more than
  // the queue depth in flight.
  virtual void stage(Piece& piece) = 0;
  // Submits every staged transfer (one system call where possible). Transfers the kernel refused
  // are appended to `failed` with their -errno; returns how many are now in flight.
  virtual uint32_t submit(std::vector<RawCompletion>& failed) = 0;
  // Waits for at least one completion of what is in flight, or for wake(), and appends every
  // completion available. When the wait itself fails (the kernel queue is unusable) it returns
  // kIo naming the call, after appending what still completed, and moves the transfers whose
  // completion never came to `lost`; from then on every piece staged is refused with that errno.
  virtual Status reap(std::vector<RawCompletion>& out, std::vector<Piece*>& lost) = 0;
  // Makes a reap() that is waiting (or the next one) return; callable from any thread.
  virtual void wake() = 0;
};

// A lane whose thread stages up to queue_depth pieces, submits them together, and refills as
// completions arrive (config.overlap_events) or once all have landed; with config.single_submit
// every piece gets its own submission.
class AsyncLane final : public Lane {
 public:
  AsyncLane(std::unique_ptr<AsyncDriver> driver, const IoConfig& config);
  ~AsyncLane() override;
  AsyncLane(const AsyncLane&) = delete;
  AsyncLane& operator=(const AsyncLane&) = delete;

  // Queues `pieces`, waking the lane's thread when it waits on completions with room to spare.
  void post(std::span<Piece* const> pieces) override;

 private:
  void run();
  // Stages and submits pending pieces while there is room; returns completions of refused ones.
  void fill(std::deque<Piece*>& pending, uint32_t& in_flight, std::vector<RawCompletion>& refused);

  std::unique_ptr<AsyncDriver> driver_;
  uint32_t depth_;
  bool single_submit_;
  bool overlap_events_;
  PieceQueue queue_;
  std::atomic<bool> waiting_with_room_{false};
  std::thread thread_;
};

}  // namespace tierzero::nvme
