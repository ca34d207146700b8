// How far a save in flight has read the optimizer's state, for the steps that run while it streams
// out (a BackgroundSave, zero_engine.h): the writer announces each prefix of the partition it
// has copied out of every stored part, and the optimizer holds its update of an element until the
// save is past it (or has ended), so the checkpoint holds the state as it was when the save began.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace tierzero::engine {

class SaveProgress {
 public:
  // Writer: partition elements [0, end) of every part are copied out (never goes back).
  void advance(int64_t end) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      read_end_ = end > read_end_ ? end : read_end_;
    }
    changed_.notify_all();
  }
  // Writer: the save reads no more (done, or stopped by an error): nothing is held from here on.
  void end() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
    }
    changed_.notify_all();
  }
  // Optimizer: returns once elements [0, end) are read or the save has ended.
  void wait_read(int64_t end) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (ended_ || read_end_ >= end) return;
    const auto start = std::chrono::steady_clock::now();
    changed_.wait(lock, [&] { return ended_ || read_end_ >= end; });
    held_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  // Seconds the optimizer waited in wait_read.
  double held_seconds() {
    std::lock_guard<std::mutex> lock(mutex_);
    return held_seconds_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int64_t read_end_ = 0;
  bool ended_ = false;
  double held_seconds_ = 0.0;
};

}  // namespace tierzero::engine
