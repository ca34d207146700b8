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
    std::unique_ptr<float[]> data = take_buffer(numel);
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

namespace tierzero::checkpoint {

std::unique_ptr<float[]> TensorPrefetcher::take_buffer(uint64_t numel) {
  std::lock_guard lock(mu_);
  auto best = pool_.end();
  for (auto it = pool_.begin(); it != pool_.end(); ++it) {
    if (it->second >= numel && (best == pool_.end() || it->second < best->second)) best = it;
  }
  if (best == pool_.end()) return std::unique_ptr<float[]>(new float[numel == 0 ? 1 : numel]);
  std::unique_ptr<float[]> data = std::move(best->first);
  pool_bytes_ -= best->second * sizeof(float);
  pool_.erase(best);
  return data;
}

void TensorPrefetcher::recycle(std::unique_ptr<float[]> data, uint64_t numel) {
  std::lock_guard lock(mu_);
  const uint64_t bytes = numel * sizeof(float);
  if (pool_bytes_ + queued_bytes_ + bytes > budget_) return;
  pool_.emplace_back(std::move(data), numel);
  pool_bytes_ += bytes;
}

}  // namespace tierzero::checkpoint
