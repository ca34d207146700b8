#include "checkpoint/tensor_prefetcher.h"

#include <span>

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

Result<PrefetchedTensor> TensorPrefetcher::read(size_t index, uint64_t numel) {
  const DType dtype = source_.dtype(index);
  const uint64_t bytes = dtype == DType::kF32 ? numel * sizeof(float) : *dtype_bytes(dtype, numel);
  PrefetchedTensor t = take_buffer(bytes);
  t.bytes = bytes;
  if (dtype == DType::kF32) {
    TZ_RETURN_IF_ERROR(source_.read_fp32(index, std::span(reinterpret_cast<float*>(t.data.get()), numel)));
  } else {
    TZ_RETURN_IF_ERROR(source_.read_raw(index, std::span(t.data.get(), bytes)));
  }
  return t;
}

void TensorPrefetcher::run() {
  const auto& tensors = source_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto numel = static_cast<uint64_t>(tensors[i].numel());
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || ready_.empty() || queued_bytes_ + numel * sizeof(float) <= budget_; });
      if (stop_) return;
    }
    Result<PrefetchedTensor> t = read(i, numel);
    std::lock_guard lock(mu_);
    if (!t.ok()) {
      error_ = t.status();
      cv_.notify_all();
      return;
    }
    queued_bytes_ += t->bytes;
    ready_.push_back(std::move(*t));
    cv_.notify_all();
  }
}

Result<PrefetchedTensor> TensorPrefetcher::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  PrefetchedTensor t = std::move(ready_.front());
  ready_.pop_front();
  queued_bytes_ -= t.bytes;
  cv_.notify_all();
  return t;
}

PrefetchedTensor TensorPrefetcher::take_buffer(uint64_t bytes) {
  std::lock_guard lock(mu_);
  auto best = pool_.end();
  for (auto it = pool_.begin(); it != pool_.end(); ++it) {
    if (it->capacity >= bytes && (best == pool_.end() || it->capacity < best->capacity)) best = it;
  }
  if (best == pool_.end()) {
    // operator new aligns to 16 bytes, enough for the floats read into it.
    const uint64_t capacity = bytes == 0 ? sizeof(float) : bytes;
    return {std::unique_ptr<std::byte[]>(new std::byte[capacity]), 0, capacity};
  }
  PrefetchedTensor t = std::move(*best);
  pool_bytes_ -= t.capacity;
  pool_.erase(best);
  return t;
}

void TensorPrefetcher::recycle(PrefetchedTensor tensor) {
  std::lock_guard lock(mu_);
  // The pool has its own budget: bounded by the queue's, it would drop every buffer while the reader
  // runs ahead (queue full), and each tensor would then fault in fresh pages.
  if (pool_bytes_ + tensor.capacity > budget_) return;
  pool_bytes_ += tensor.capacity;
  pool_.push_back(std::move(tensor));
}

}  // namespace tierzero::checkpoint
