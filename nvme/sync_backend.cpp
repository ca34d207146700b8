// The portable backend: a pool of threads doing pread/pwrite, queue_depth per lane.
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "nvme/internal/lanes.h"

namespace tierzero::nvme {

namespace {

int64_t transfer_once(const Piece& p) {
  const ssize_t r = p.op == Op::kRead
                        ? ::pread(p.fd, p.next_buf(), p.next_length(), static_cast<off_t>(p.next_offset()))
                        : ::pwrite(p.fd, p.next_buf(), p.next_length(), static_cast<off_t>(p.next_offset()));
  return r < 0 ? -int64_t{errno} : int64_t{r};
}

class SyncLane final : public Lane {
 public:
  explicit SyncLane(uint32_t threads) {
    workers_.reserve(threads);
    for (uint32_t i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }
  ~SyncLane() override {
    queue_.close();
    for (auto& w : workers_) w.join();
  }

  void post(std::span<Piece* const> pieces) override { queue_.push(pieces); }

 private:
  void run() {
    while (Piece* p = queue_.take_one()) {
      if (p->owner->failed.load(std::memory_order_acquire)) {
        abandon_piece(*p, internal_error("piece skipped after an earlier failure"));
        continue;
      }
      if (Status staged = stage_piece(*p); !staged.ok()) {
        abandon_piece(*p, staged);
        continue;
      }
      while (settle_completion(*p, transfer_once(*p))) {
      }
    }
  }

  PieceQueue queue_;
  std::vector<std::thread> workers_;
};

}  // namespace

std::unique_ptr<Lane> make_sync_lane(const IoConfig& config) { return std::make_unique<SyncLane>(config.queue_depth); }

}  // namespace tierzero::nvme
