// The hand-off between submitters and one lane's thread(s).
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <span>

#include "nvme/internal/piece.h"

namespace tierzero::nvme {

class PieceQueue {
 public:
  // Appends `pieces` in order and wakes a waiting taker.
  void push(std::span<Piece* const> pieces);
  // Moves every queued piece to the back of `out`. With `wait`, blocks until there is at least
  // one or the queue is closed. Returns false only when closed and empty.
  bool take_all(std::deque<Piece*>& out, bool wait);
  // Takes one piece, blocking until there is one; nullptr once closed and empty.
  Piece* take_one();
  // Lets takers drain what is queued and then stop.
  void close();
  // True when nothing is queued (a snapshot).
  bool empty();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece*> pieces_;
  bool closed_ = false;
};

// A lane: one io_uring ring, libaio context or group of pread/pwrite threads, with its thread(s).
// Pieces posted to a lane are transferred in order, up to the lane's queue depth at a time.
class Lane {
 public:
  virtual ~Lane() = default;
  // Queues `pieces` for this lane.
  virtual void post(std::span<Piece* const> pieces) = 0;
};

}  // namespace tierzero::nvme
