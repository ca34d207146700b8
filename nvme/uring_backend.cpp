// The io_uring backend: one ring per lane, fixed buffers mirrored from the engine's registry.
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <thread>

#include "nvme/internal/async_lane.h"
#include "nvme/internal/lanes.h"
#include "nvme/internal/ring_files.h"

namespace tierzero::nvme {

namespace {

constexpr int kMaxSubmitSpins = 1000;
// How long a lane whose wait failed keeps collecting completions before reporting the rest lost.
constexpr int kDrainSeconds = 10;

class UringDriver final : public AsyncDriver, public BufferRegistry::Listener {
 public:
  UringDriver(BufferRegistry& registry, bool use_fixed)
      : registry_(registry), fixed_(use_fixed), use_fixed_files_(use_fixed) {}
  ~UringDriver() override {
    if (fixed_) registry_.remove_listener(this);
    files_->detach();
    if (ring_ready_) io_uring_queue_exit(&ring_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }
  UringDriver(const UringDriver&) = delete;
  UringDriver& operator=(const UringDriver&) = delete;

  // Sets up a ring of `depth` entries plus one for the wake-up read, and, when asked and the
  // kernel can, the sparse buffer table.
  Status init(uint32_t depth) {
    const uint32_t entries = depth + 1;
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return errno_status(errno, "eventfd for the io_uring lane");
    io_uring_params params{};
    params.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
    int r = io_uring_queue_init_params(entries, &ring_, &params);
    if (r == -EINVAL) {
      params = io_uring_params{};
      r = io_uring_queue_init_params(entries, &ring_, &params);
    }
    if (r < 0) return errno_status(-r, "io_uring_queue_init(" + std::to_string(entries) + " entries)");
    ring_ready_ = true;
    if (fixed_ && io_uring_register_buffers_sparse(&ring_, BufferRegistry::kSlots) < 0) fixed_ = false;
    if (fixed_) registry_.add_listener(this);
    if (use_fixed_files_ && !files_->init(&ring_)) use_fixed_files_ = false;
    return arm_wake();
  }

  Status set_slot(uint32_t slot, void* base, uint64_t bytes) override {
    iovec iov{base, bytes};
    __u64 tag = 0;
    const int r = io_uring_register_buffers_update_tag(&ring_, slot, &iov, &tag, 1);
    if (r < 0) return errno_status(-r, "io_uring_register_buffers_update_tag(" + std::to_string(bytes) + " bytes)");
    return {};
  }

  void stage(Piece& p) override {
    if (broken_ != 0) {
      refused_.push_back({&p, broken_});
      return;
    }
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    const int slot = fixed_ ? registry_.find(p.next_buf(), p.next_length()) : -1;
    const auto len = static_cast<unsigned>(p.next_length());
    const auto off = static_cast<__u64>(p.next_offset());
    if (p.op == Op::kRead) {
      if (slot >= 0)
        io_uring_prep_read_fixed(sqe, p.fd, p.next_buf(), len, off, slot);
      else
        io_uring_prep_read(sqe, p.fd, p.next_buf(), len, off);
    } else {
      if (slot >= 0)
        io_uring_prep_write_fixed(sqe, p.fd, p.next_buf(), len, off, slot);
      else
        io_uring_prep_write(sqe, p.fd, p.next_buf(), len, off);
    }
    const int file_slot = use_fixed_files_ && p.owner->posix_file ? files_->slot_for(*p.owner->posix_file, p.fd) : -1;
    if (file_slot >= 0) {
      sqe->fd = file_slot;
      io_uring_sqe_set_flags(sqe, IOSQE_FIXED_FILE);
    }
    io_uring_sqe_set_data(sqe, &p);
    staged_.push_back(&p);
  }

  uint32_t submit(std::vector<RawCompletion>& failed) override {
    failed.insert(failed.end(), refused_.begin(), refused_.end());
    refused_.clear();
    const auto total = static_cast<uint32_t>(staged_.size());
    uint32_t submitted = 0;
    int spins = 0;
    while (submitted < total) {
      const int r = io_uring_submit(&ring_);
      if (r > 0) {
        submitted += static_cast<uint32_t>(r);
        spins = 0;
        continue;
      }
      if ((r == 0 || r == -EINTR || r == -EAGAIN || r == -EBUSY) && ++spins < kMaxSubmitSpins) {
        std::this_thread::yield();
        continue;
      }
      // The ring is unusable: never enter it again, so no staged entry can reach the kernel later.
      broken_ = r < 0 ? r : -EIO;
      for (uint32_t i = submitted; i < total; ++i) failed.push_back({staged_[i], broken_});
      break;
    }
    in_flight_.insert(in_flight_.end(), staged_.begin(), staged_.begin() + submitted);
    staged_.clear();
    return submitted;
  }

  Status reap(std::vector<RawCompletion>& out, std::vector<Piece*>& lost) override {
    io_uring_cqe* cqe = nullptr;
    int r;
    do {
      r = io_uring_wait_cqe(&ring_, &cqe);
    } while (r == -EINTR || r == -EAGAIN);
    if (r < 0) return drain_after_failed_wait(r, out, lost);
    if (collect(out) && broken_ == 0) {
      if (Status s = arm_wake(); !s.ok()) broken_ = -EIO;
    }
    return {};
  }

  void wake() override {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }

 private:
  // Appends every completion in the completion queue (no system call) and forgets those pieces;
  // returns whether the wake-up read completed.
  bool collect(std::vector<RawCompletion>& out) {
    io_uring_cqe* cqe = nullptr;
    unsigned head, seen = 0;
    bool woken = false;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      auto* piece = static_cast<Piece*>(io_uring_cqe_get_data(cqe));
      if (piece != nullptr) {
        out.push_back({piece, cqe->res});
        forget(piece);
      } else {
        woken = true;
      }
      ++seen;
    }
    io_uring_cq_advance(&ring_, seen);
    return woken;
  }

  void forget(Piece* piece) {
    auto it = std::find(in_flight_.begin(), in_flight_.end(), piece);
    if (it == in_flight_.end()) return;
    *it = in_flight_.back();
    in_flight_.pop_back();
  }

  // io_uring_wait_cqe failed: the ring cannot be entered. Completions still land in the shared
  // completion queue, so it is read without system calls (sleeping between looks, which also runs
  // deferred task work) for up to kDrainSeconds; what never completed is reported lost. The ring
  // refuses everything staged afterwards.
  Status drain_after_failed_wait(int err, std::vector<RawCompletion>& out, std::vector<Piece*>& lost) {
    broken_ = err;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kDrainSeconds);
    while (!in_flight_.empty() && std::chrono::steady_clock::now() < deadline) {
      collect(out);
      if (!in_flight_.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const size_t missing = in_flight_.size();
    lost.insert(lost.end(), in_flight_.begin(), in_flight_.end());
    in_flight_.clear();
    std::string what = "io_uring_wait_cqe on an I/O lane (" + std::to_string(missing) +
                       " transfer(s) never completed within " + std::to_string(kDrainSeconds) + " s";
    if (missing > 0) what += "; their buffers may still be written by the kernel: do not reuse them";
    return errno_status(-err, what + "); the lane refuses further I/O: recreate the engine");
  }

  // Queues a read of the wake-up eventfd (user data null) and submits it; nothing else is staged
  // when this runs.
  Status arm_wake() {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    io_uring_prep_read(sqe, wake_fd_, &wake_count_, sizeof wake_count_, 0);
    io_uring_sqe_set_data(sqe, nullptr);
    int r;
    do {
      r = io_uring_submit(&ring_);
    } while (r == -EINTR || r == -EAGAIN);
    if (r < 0) return errno_status(-r, "io_uring_submit (wake-up read)");
    return {};
  }

  io_uring ring_{};
  bool ring_ready_ = false;
  BufferRegistry& registry_;
  bool fixed_;
  bool use_fixed_files_;
  std::shared_ptr<RingFiles> files_ = std::make_shared<RingFiles>();
  int broken_ = 0;
  int wake_fd_ = -1;
  uint64_t wake_count_ = 0;
  std::vector<Piece*> staged_;
  std::vector<Piece*> in_flight_;  // submitted, completion not yet seen
  std::vector<RawCompletion> refused_;
};

}  // namespace

Result<std::unique_ptr<Lane>> make_uring_lane(const IoConfig& config, BufferRegistry& buffers) {
  auto driver = std::make_unique<UringDriver>(buffers, config.register_buffers);
  TZ_RETURN_IF_ERROR(driver->init(config.queue_depth));
  return std::unique_ptr<Lane>(std::make_unique<AsyncLane>(std::move(driver), config));
}

}  // namespace tierzero::nvme
