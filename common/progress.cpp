#include "common/internal/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/internal/units.h"

namespace tierzero {

ProgressBar::ProgressBar(std::string label, uint64_t total, std::string unit)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      tty_(isatty(STDERR_FILENO) == 1),
      quiet_(std::getenv("TIERZERO_NO_PROGRESS") != nullptr),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::advance(uint64_t delta) {
  std::lock_guard lock(mu_);
  done_ += delta;
  if (quiet_ || finished_) return;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  } else {
    int decile = total_ ? static_cast<int>(10 * done_ / total_) : 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
  }
  last_draw_ = now;
  draw(false);
}

void ProgressBar::finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!quiet_) draw(true);
}

std::string ProgressBar::amount(uint64_t v) const {
  return unit_ == "B" ? format_bytes(v) : std::to_string(v) + " " + unit_;
}

void ProgressBar::draw(bool final_line) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double frac = total_ ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  if (frac > 1) frac = 1;
  constexpr int kWidth = 30;
  std::string bar(kWidth, ' ');
  int filled = static_cast<int>(frac * kWidth);
  for (int i = 0; i < filled; ++i) bar[i] = '=';
  if (filled < kWidth) bar[filled] = '>';
  double rate = secs > 0 ? static_cast<double>(done_) / secs : 0;
  double eta = rate > 0 ? static_cast<double>(total_ - std::min(done_, total_)) / rate : 0;
  std::string speed = unit_ == "B" ? format_rate(rate) : std::to_string(static_cast<long>(rate)) + " " + unit_ + "/s";
  std::fprintf(stderr, "%s%s [%s] %3d%% %s / %s  %s  %s %.0fs%s", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
               static_cast<int>(frac * 100), amount(done_).c_str(), amount(total_).c_str(), speed.c_str(),
               final_line ? "in" : "ETA", final_line ? secs : eta, (final_line || !tty_) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace tierzero
