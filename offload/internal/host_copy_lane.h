// One emulated copy queue of the host-memory GPU tier: a thread that runs queued copies in
// order, each `latency` after it was queued. With it a copy is still in flight after copy_async
// returns, as on a CUDA stream, so the tier manager's event discipline is exercised (and seen by
// ThreadSanitizer) on machines without a GPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace tierzero::offload {

class HostCopyLane {
 public:
  explicit HostCopyLane(std::chrono::microseconds latency);
  // Runs everything queued, then joins the thread.
  ~HostCopyLane();
  HostCopyLane(const HostCopyLane&) = delete;
  HostCopyLane& operator=(const HostCopyLane&) = delete;

  // Queues `work` and returns its ticket (1, 2, ... in queue order).
  uint64_t push(std::function<void()> work);
  // The ticket of the latest item queued; 0 when none was.
  uint64_t last_ticket();
  // Blocks until the item with `ticket` and every item before it have run.
  void wait(uint64_t ticket);

 private:
  struct Item {
    std::chrono::steady_clock::time_point due;
    std::function<void()> work;
  };
  void run();

  const std::chrono::microseconds latency_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  uint64_t queued_ = 0;
  uint64_t done_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the state above exists
};

}  // namespace tierzero::offload
