#include "offload/internal/host_copy_lane.h"

namespace tierzero::offload {

HostCopyLane::HostCopyLane(std::chrono::microseconds latency) : latency_(latency), thread_([this] { run(); }) {}

HostCopyLane::~HostCopyLane() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t HostCopyLane::push(std::function<void()> work) {
  uint64_t ticket = 0;
  {
    std::lock_guard lock(mu_);
    queue_.push_back({std::chrono::steady_clock::now() + latency_, std::move(work)});
    ticket = ++queued_;
  }
  cv_.notify_all();
  return ticket;
}

uint64_t HostCopyLane::last_ticket() {
  std::lock_guard lock(mu_);
  return queued_;
}

void HostCopyLane::wait(uint64_t ticket) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket; });
}

void HostCopyLane::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::this_thread::sleep_until(item.due);
    item.work();
    lock.lock();
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace tierzero::offload
