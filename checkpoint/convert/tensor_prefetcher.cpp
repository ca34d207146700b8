#include "checkpoint/convert/internal/tensor_prefetcher.h"

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

uint64_t ring_size(const ConsolidationSource& source, uint64_t budget, uint64_t piece) {
  uint64_t largest = 0;  // integer tensors are read whole
  for (size_t i = 0; i < source.tensors().size(); ++i) {
    if (source.dtype(i) == ElementType::kF32) continue;
    largest = std::max(largest, *element_bytes(source.dtype(i), static_cast<uint64_t>(source.tensors()[i].numel())));
  }
  return round_up(std::max({budget, piece, round_up(largest, kAlign), kAlign}), kPage);
}

}  // namespace

void TensorPrefetcher::FreeBytes::operator()(std::byte* p) const { std::free(p); }

TensorPrefetcher::TensorPrefetcher(ConsolidationSource& source, uint64_t budget_bytes, uint64_t piece_bytes)
    : source_(source),
      piece_bytes_(std::max(round_up(piece_bytes, kAlign), kAlign)),
      ring_bytes_(ring_size(source, budget_bytes, piece_bytes_)) {
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
  bool wrap = false;  // the region starts at 0; the ring's end (maybe empty) is held with it
  uint64_t skip = 0;
  cv_.wait(lock, [&] {
    if (used_ == 0) head_ = 0;
    wrap = head_ + size > ring_bytes_;
    skip = wrap ? ring_bytes_ - head_ : 0;
    return stop_ || used_ + skip + size <= ring_bytes_;
  });
  if (stop_) return std::numeric_limits<uint64_t>::max();
  const uint64_t offset = wrap ? 0 : head_;
  regions_.push_back(skip + size);
  used_ += skip + size;
  head_ = offset + size;
  return offset;
}

bool TensorPrefetcher::publish(Status read, PrefetchedPiece piece) {
  std::lock_guard lock(mu_);
  if (!read.ok()) {
    error_ = std::move(read);
  } else {
    ready_.push_back(piece);
  }
  cv_.notify_all();
  return error_.ok();
}

bool TensorPrefetcher::read_tensor(size_t index) {
  const auto numel = static_cast<uint64_t>(source_.tensors()[index].numel());
  const ElementType dtype = source_.dtype(index);
  if (dtype != ElementType::kF32) {
    const uint64_t bytes = *element_bytes(dtype, numel);
    const uint64_t offset = allocate(bytes);
    if (offset == std::numeric_limits<uint64_t>::max()) return false;
    std::byte* data = ring_.get() + offset;
    return publish(source_.read_raw(index, std::span(data, bytes)), {index, data, bytes, true});
  }
  const uint64_t per_piece = piece_bytes_ / sizeof(float);
  uint64_t first = 0;
  do {
    const uint64_t n = std::min(per_piece, numel - first);
    const uint64_t offset = allocate(n * sizeof(float));
    if (offset == std::numeric_limits<uint64_t>::max()) return false;
    std::byte* data = ring_.get() + offset;
    const Status read = source_.read_fp32_range(index, first, std::span(reinterpret_cast<float*>(data), n));
    first += n;
    if (!publish(read, {index, data, n * sizeof(float), first == numel})) return false;
  } while (first < numel);
  return true;
}

void TensorPrefetcher::run() {
  for (size_t i = 0; i < source_.tensors().size(); ++i) {
    if (!read_tensor(i)) return;
  }
}

Result<PrefetchedPiece> TensorPrefetcher::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !ready_.empty() || !error_.ok(); });
  if (ready_.empty()) return error_;
  const PrefetchedPiece t = ready_.front();
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
