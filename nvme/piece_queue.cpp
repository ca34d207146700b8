// PieceQueue: a closable multi-producer queue of piece pointers.
#include "nvme/internal/piece_queue.h"

namespace tierzero::nvme {

void PieceQueue::push(std::span<Piece* const> pieces) {
  {
    std::lock_guard lock(mu_);
    pieces_.insert(pieces_.end(), pieces.begin(), pieces.end());
  }
  if (pieces.size() == 1)
    cv_.notify_one();
  else
    cv_.notify_all();
}

bool PieceQueue::take_all(std::deque<Piece*>& out, bool wait) {
  std::unique_lock lock(mu_);
  if (wait) cv_.wait(lock, [&] { return closed_ || !pieces_.empty(); });
  if (pieces_.empty()) return !closed_;
  out.insert(out.end(), pieces_.begin(), pieces_.end());
  pieces_.clear();
  return true;
}

Piece* PieceQueue::take_one() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return closed_ || !pieces_.empty(); });
  if (pieces_.empty()) return nullptr;
  Piece* p = pieces_.front();
  pieces_.pop_front();
  return p;
}

bool PieceQueue::empty() {
  std::lock_guard lock(mu_);
  return pieces_.empty();
}

void PieceQueue::close() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

}  // namespace tierzero::nvme
