#include "checkpoint/tensor_prefetcher.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <new>
#include <span>

namespace tierzero::checkpoint {
namespace {

constexpr uint64_t kPage = 4096;
constexpr uint64_t kAlign = 64;

uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

uint64_t tensor_bytes(const ConsolidationSource& source, size_t index) {
  const auto numel = static_cast<uint64_t>(source.tensors()[index].numel());
  const DType dtype = source.dtype(index);
  return dtype == DType::kF32 ? numel * sizeof(float) : *dtype_bytes(dtype, numel);
}

uint64_t ring_size(const ConsolidationSource& source, uint64_t budget) {
  uint64_t largest = 0;
  for (size_t i = 0; i < source.tensors().size(); ++i) largest = std::max(largest, tensor_bytes(source, i));
  return round_up(std::max({budget, round_up(largest, kAlign), kAlign}), kPage);
}

}  // namespace

void TensorPrefetcher::FreeBytes::operator()(std::byte* p) const { std::free(p); }

TensorPrefetcher::TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes)
    : source_(source), ring_bytes_(ring_size(source, budget_bytes)) {
  void* p = std::aligned_alloc(kPage, ring_bytes_);
  if (p == nullptr) throw std::bad_alloc();
  ring_.reset(static_cast<std::byte*>(p));
  thread_ = std::thread([this] { run(); });
}

TensorPrefetcher::~TensorPrefetcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t TensorPrefetcher::allocate(uint64_t bytes) {
  const uint64_t size = std::max(round_up(bytes, kAlign), kAlign);  // never empty: regions_ counts it
  std::unique_lock lock(mu_);
  uint64_t skip = 0;  // the ring's end, too short for this region, is held with it
  cv_.wait(lock, [&] {
    if (used_ == 0) head_ = 0;
    skip = head_ + size > ring_bytes_ ? ring_bytes_ - head_ : 0;
    return stop_ || used_ + skip + size <= ring_bytes_;
  });
  if (stop_) return std::numeric_limits<uint64_t>::max();
  const uint64_t offset = skip > 0 ? 0 : head_;
  regions_.push_back(skip + size);
  used_ += skip + size;
  head_ = offset + size;
  return offset;
}

Status TensorPrefetcher::read(size_t index, std::byte* data, uint64_t bytes) {
  if (source_.dtype(index) == DType::kF32) {
    return source_.read_fp32(index, std::span(reinterpret_cast<float*>(data), bytes / sizeof(float)));
  }
  return source_.read_raw(index, std::span(data, bytes));
}

void TensorPrefetcher::run() {
  const auto& tensors = source_.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = tensor_bytes(source_, i);
    const uint64_t offset = allocate(bytes);
    if (offset == std::numeric_limits<uint64_t>::max()) return;
    Status s = read(i, ring_.get() + offset, bytes);
    std::lock_guard lock(mu_);
    if (!s.ok()) {
      error_ = s;
      cv_.notify_all();
      return;
    }
    ready_.push_back({ring_.get() + offset, bytes});
    cv_.notify_all();
  }
}

Result<PrefetchedTensor> TensorPrefetcher::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  const PrefetchedTensor t = ready_.front();
  ready_.pop_front();
  return t;
}

void TensorPrefetcher::recycle() {
  {
    std::lock_guard lock(mu_);
    if (regions_.empty()) return;
    used_ -= regions_.front();
    regions_.pop_front();
  }
  cv_.notify_all();
}

}  // namespace tierzero::checkpoint
