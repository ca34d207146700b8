// IoTicket: waiting on and polling one request's completion.
#include <mutex>

#include "nvme/internal/piece.h"

namespace tierzero::nvme {

namespace detail {

void TicketState::piece_settled(const Piece& piece, const Status& piece_status) {
  if (!piece_status.ok()) {
    std::lock_guard lock(mu);
    if (status.ok()) status = piece_status;
    failed.store(true, std::memory_order_release);
  } else {
    bytes_done.fetch_add(piece.user_bytes, std::memory_order_relaxed);
  }
  if (pieces_left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  Status final_status;
  {
    std::lock_guard lock(mu);
    final_status = status;
  }
  if (final_status.ok() && sync_after && op == Op::kWrite) final_status = file->sync();
  complete_now(final_status);
}

void TicketState::complete_now(const Status& final_status) {
  // The request lets go of its file before anyone can see it complete, so a caller that drops its
  // own FileRef after wait() really closes the file.
  file.reset();
  std::shared_ptr<TicketState> keep_alive;
  {
    std::lock_guard lock(mu);
    status = final_status;
    elapsed = std::chrono::steady_clock::now() - submitted;
    complete.store(true, std::memory_order_release);
    keep_alive = std::move(self);
    cv.notify_all();
  }
  if (on_complete) on_complete(final_status);
}

}  // namespace detail

Status IoTicket::wait() const {
  if (!state_) return invalid_argument("wait() on an empty IoTicket; use the ticket submit() returned");
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->complete.load(std::memory_order_acquire); });
  return state_->status;
}

bool IoTicket::ready() const { return state_ && state_->complete.load(std::memory_order_acquire); }

uint64_t IoTicket::bytes_done() const { return state_ ? state_->bytes_done.load(std::memory_order_relaxed) : 0; }

std::chrono::nanoseconds IoTicket::elapsed() const {
  if (!ready()) return std::chrono::nanoseconds(0);
  std::lock_guard lock(state_->mu);
  return state_->elapsed;
}

}  // namespace tierzero::nvme
