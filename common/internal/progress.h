// A progress bar on stderr for anything that takes more than a few seconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace tierzero {

// Shows "label [=====>    ] 42% 1.20 GiB / 2.86 GiB  310 MB/s  ETA 5s" on stderr. On a terminal
// it redraws in place at most 10 times a second; otherwise it prints a line every 10% so logs stay
// short. Quiet when TIERZERO_NO_PROGRESS is set. Thread-safe: advance() may be called from workers.
class ProgressBar {
 public:
  // `total` is in `unit`s; unit "B" formats values as byte sizes, anything else as counts.
  ProgressBar(std::string label, uint64_t total, std::string unit = "B");
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Adds `delta` units done and redraws when due.
  void advance(uint64_t delta);
  // Draws the final state and ends the line; called by the destructor if not called before.
  void finish();

 private:
  void draw(bool final_line);
  std::string amount(uint64_t v) const;

  std::mutex mu_;
  std::string label_;
  std::string unit_;
  uint64_t total_;
  uint64_t done_ = 0;
  int last_decile_ = -1;
  bool tty_;
  bool quiet_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace tierzero
