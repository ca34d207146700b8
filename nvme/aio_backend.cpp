// The libaio backend: one kernel AIO context per lane.
#include <libaio.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>

#include "nvme/internal/async_lane.h"
#include "nvme/internal/lanes.h"

namespace tierzero::nvme {

namespace {

constexpr int kMaxSubmitSpins = 1000;

class AioDriver final : public AsyncDriver {
 public:
  explicit AioDriver(uint32_t depth) : iocbs_(depth), events_(depth + 1) {
    free_.reserve(depth);
    for (iocb& cb : iocbs_) free_.push_back(&cb);
  }
  ~AioDriver() override {
    if (ctx_ != nullptr) io_destroy(ctx_);
    if (wake_fd_ >= 0) ::close(wake_fd_);
  }
  AioDriver(const AioDriver&) = delete;
  AioDriver& operator=(const AioDriver&) = delete;

  // Sets up the context (depth events plus one for the wake-up poll) and arms the poll where the
  // kernel has IOCB_CMD_POLL (4.18+); without it, wake() only takes effect at the next completion.
  Status init() {
    const int r = io_setup(static_cast<int>(events_.size()), &ctx_);
    if (r < 0) {
      ctx_ = nullptr;
      return errno_status(-r, "io_setup(" + std::to_string(events_.size()) +
                                  " events); if it is EAGAIN, raise /proc/sys/fs/aio-max-nr");
    }
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0) return errno_status(errno, "eventfd for the libaio lane");
    arm_wake();
    return {};
  }

  void wake() override {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }

  void stage(Piece& p) override {
    if (broken_ != 0) {
      refused_.push_back({&p, broken_});
      return;
    }
    iocb* cb = free_.back();
    free_.pop_back();
    const auto off = static_cast<long long>(p.next_offset());
    if (p.op == Op::kRead)
      io_prep_pread(cb, p.fd, p.next_buf(), p.next_length(), off);
    else
      io_prep_pwrite(cb, p.fd, p.next_buf(), p.next_length(), off);
    cb->data = &p;
    staged_.push_back(cb);
  }

  uint32_t submit(std::vector<RawCompletion>& failed) override {
    failed.insert(failed.end(), refused_.begin(), refused_.end());
    refused_.clear();
    size_t next = 0;
    uint32_t submitted = 0;
    int spins = 0;
    while (next < staged_.size()) {
      const int r = io_submit(ctx_, static_cast<long>(staged_.size() - next), staged_.data() + next);
      if (r > 0) {
        next += static_cast<size_t>(r);
        submitted += static_cast<uint32_t>(r);
        spins = 0;
      } else if ((r == -EINTR || r == -EAGAIN) && ++spins < kMaxSubmitSpins) {
        std::this_thread::yield();
      } else {
        // The kernel refused the first remaining iocb: report it and go on with the rest.
        iocb* cb = staged_[next++];
        failed.push_back({static_cast<Piece*>(cb->data), r < 0 ? r : -EIO});
        free_.push_back(cb);
        spins = 0;
      }
    }
    staged_.clear();
    return submitted;
  }

  Status reap(std::vector<RawCompletion>& out, std::vector<Piece*>& lost) override {
    int n;
    do {
      n = io_getevents(ctx_, 1, static_cast<long>(events_.size()), events_.data(), nullptr);
    } while (n == -EINTR);
    if (n < 0) return fail_in_flight(n, lost);
    bool woken = false;
    for (int i = 0; i < n; ++i) {
      const io_event& ev = events_[i];
      if (ev.obj == &wake_cb_) {
        woken = true;
        continue;
      }
      out.push_back({static_cast<Piece*>(ev.obj->data), static_cast<int64_t>(static_cast<long>(ev.res))});
      free_.push_back(ev.obj);
    }
    if (woken) {
      uint64_t count = 0;
      (void)!::read(wake_fd_, &count, sizeof count);
      arm_wake();
    }
    return {};
  }

 private:
  // io_getevents failed: the context cannot be waited on, so every submitted iocb (neither free
  // nor staged) is reported lost, and everything staged afterwards is refused with `err`.
  Status fail_in_flight(int err, std::vector<Piece*>& lost) {
    broken_ = err;
    std::vector<bool> idle(iocbs_.size(), false);
    for (iocb* cb : free_) idle[static_cast<size_t>(cb - iocbs_.data())] = true;
    for (size_t i = 0; i < iocbs_.size(); ++i) {
      if (idle[i]) continue;
      lost.push_back(static_cast<Piece*>(iocbs_[i].data));
      free_.push_back(&iocbs_[i]);
    }
    std::string what = "io_getevents on an I/O lane (" + std::to_string(lost.size()) + " transfer(s) in flight";
    if (!lost.empty()) what += "; their buffers may still be written by the kernel: do not reuse them";
    return errno_status(-err, what + "); the lane refuses further I/O: recreate the engine");
  }

  void arm_wake() {
    io_prep_poll(&wake_cb_, wake_fd_, POLLIN);
    iocb* cbs[1] = {&wake_cb_};
    int r;
    do {
      r = io_submit(ctx_, 1, cbs);
    } while (r == -EINTR || r == -EAGAIN);
  }

  io_context_t ctx_ = nullptr;
  int wake_fd_ = -1;
  iocb wake_cb_{};
  std::vector<iocb> iocbs_;
  std::vector<io_event> events_;
  std::vector<iocb*> free_;
  std::vector<iocb*> staged_;
  std::vector<RawCompletion> refused_;
  int broken_ = 0;  // -errno once io_getevents failed
};

}  // namespace

Result<std::unique_ptr<Lane>> make_aio_lane(const IoConfig& config) {
  auto driver = std::make_unique<AioDriver>(config.queue_depth);
  TZ_RETURN_IF_ERROR(driver->init());
  return std::unique_ptr<Lane>(std::make_unique<AsyncLane>(std::move(driver), config));
}

}  // namespace tierzero::nvme
