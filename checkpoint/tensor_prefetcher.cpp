#include "checkpoint/tensor_prefetcher.h"

namespace tierzero::checkpoint {

TensorPrefetcher::TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes)
    : source_(source), budget_(budget_bytes), thread_([this] { run(); }) {}

TensorPrefetcher::~TensorPrefetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TensorPrefetcher::run() {
  const auto& tensors = source_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto numel = static_cast<size_t>(tensors[i].numel());
    const uint64_t bytes = numel * sizeof(float);
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || ready_.empty() || queued_bytes_ + bytes <= budget_; });
      if (stop_) return;
    }
    std::unique_ptr<float[]> data(new float[numel == 0 ? 1 : numel]);
    Status status = source_.read_fp32(i, std::span(data.get(), numel));
    std::lock_guard lock(mu_);
    if (!status.ok()) {
      error_ = status;
      cv_.notify_all();
      return;
    }
    ready_.emplace_back(std::move(data), bytes);
    queued_bytes_ += bytes;
    cv_.notify_all();
  }
}

Result<std::unique_ptr<float[]>> TensorPrefetcher::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  auto [data, bytes] = std::move(ready_.front());
  ready_.pop_front();
  queued_bytes_ -= bytes;
  cv_.notify_all();
  return std::move(data);
}

}  // namespace tierzero::checkpoint
