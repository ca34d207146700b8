// The loop that keeps a kernel queue full: take, stage, submit, reap, settle, resubmit.
#include "nvme/internal/async_lane.h"

namespace tierzero::nvme {

AsyncLane::AsyncLane(std::unique_ptr<AsyncDriver> driver, const IoConfig& config)
    : driver_(std::move(driver)),
      depth_(config.queue_depth),
      single_submit_(config.single_submit),
      overlap_events_(config.overlap_events),
      thread_([this] { run(); }) {}

AsyncLane::~AsyncLane() {
  queue_.close();
  thread_.join();
}

void AsyncLane::post(std::span<Piece* const> pieces) {
  queue_.push(pieces);
  if (waiting_with_room_.exchange(false)) driver_->wake();
}

void AsyncLane::fill(std::deque<Piece*>& pending, uint32_t& in_flight, std::vector<RawCompletion>& refused) {
  uint32_t staged = 0;
  while (in_flight + staged < depth_ && !pending.empty()) {
    Piece* p = pending.front();
    pending.pop_front();
    if (p->owner->failed.load(std::memory_order_acquire)) {
      abandon_piece(*p, internal_error("piece skipped after an earlier failure"));
      continue;
    }
    if (Status s = stage_piece(*p); !s.ok()) {
      abandon_piece(*p, s);
      continue;
    }
    driver_->stage(*p);
    ++staged;
    if (single_submit_) {
      in_flight += driver_->submit(refused);
      staged = 0;
    }
  }
  if (staged > 0) in_flight += driver_->submit(refused);
}

void AsyncLane::run() {
  std::deque<Piece*> pending;
  std::vector<RawCompletion> completions;
  std::vector<Piece*> lost;
  uint32_t in_flight = 0;
  for (;;) {
    const bool idle = pending.empty() && in_flight == 0;
    if (!queue_.take_all(pending, idle) && idle) return;
    completions.clear();
    if (overlap_events_ || in_flight == 0) fill(pending, in_flight, completions);
    if (in_flight > 0) {
      // With room in the queue, new pieces should not wait for the next completion: post()
      // wakes the reap. The flag is raised before the queue is checked, so no post is missed.
      const bool room = overlap_events_ && in_flight < depth_;
      if (room) waiting_with_room_.store(true);
      if (room && !queue_.empty()) {
        waiting_with_room_.store(false);
      } else {
        const size_t refused = completions.size();
        lost.clear();
        const Status reaped = driver_->reap(completions, lost);
        in_flight -= static_cast<uint32_t>(completions.size() - refused + lost.size());
        waiting_with_room_.store(false);
        for (Piece* p : lost) abandon_piece(*p, reaped);
      }
    }
    for (const RawCompletion& c : completions) {
      if (settle_completion(*c.piece, c.result)) pending.push_front(c.piece);
    }
  }
}

}  // namespace tierzero::nvme
