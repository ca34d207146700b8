// A stream's XXH3 digests behind its fill (internal/stream_digest.h).
#include "checkpoint/storage/internal/stream_digest.h"

#include <algorithm>
#include <vector>

namespace tierzero::checkpoint {

StreamDigest::StreamDigest() : file_state_(XXH3_createState()) {
  XXH3_64bits_reset(file_state_);
  thread_ = std::thread([this] { run(); });
}

StreamDigest::~StreamDigest() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  for (Range& range : ranges_) XXH3_freeState(range.state);
  XXH3_freeState(file_state_);
}

void StreamDigest::hash(uint64_t offset, std::span<const std::byte> bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({offset, bytes});
  }
  changed_.notify_all();
}

void StreamDigest::hashed_through(uint64_t end) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return hashed_end_ >= end; });
}

size_t StreamDigest::open_range(uint64_t begin) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_.push_back({.begin = begin, .state = state});
  return ranges_.size() - 1;
}

void StreamDigest::close_range(size_t id, uint64_t end) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_[id].end = end;
}

uint64_t StreamDigest::file_digest() {
  std::lock_guard<std::mutex> lock(mutex_);
  return XXH3_64bits_digest(file_state_);
}

uint64_t StreamDigest::range_digest(size_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return XXH3_64bits_digest(ranges_[id].state);
}

void StreamDigest::run() {
  for (;;) {
    Piece piece;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      piece = queue_.front();
      queue_.pop_front();
    }
    hash_now(piece.offset, piece.bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hashed_end_ = piece.offset + piece.bytes.size();
    }
    changed_.notify_all();
  }
}

void StreamDigest::hash_now(uint64_t offset, std::span<const std::byte> bytes) {
  constexpr size_t kChunk = 1 << 20;  // hashed for the file and its ranges while in cache
  struct Slice {
    XXH3_state_t* state;
    uint64_t begin, end;
  };
  std::vector<Slice> slices;
  for (size_t done = 0; done < bytes.size(); done += kChunk) {
    const uint64_t lo = offset + done;
    const uint64_t hi = lo + std::min(kChunk, bytes.size() - done);
    XXH3_64bits_update(file_state_, bytes.data() + done, hi - lo);
    slices.clear();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t r = first_open_; r < ranges_.size() && ranges_[r].begin < hi; ++r) {
        const Range& range = ranges_[r];
        const uint64_t begin = std::max(range.begin, lo), end = std::min(range.end, hi);
        if (begin < end) slices.push_back({range.state, begin, end});
      }
      while (first_open_ < ranges_.size() && ranges_[first_open_].end <= hi) ++first_open_;
    }
    for (const Slice& slice : slices)
      XXH3_64bits_update(slice.state, bytes.data() + (slice.begin - offset), slice.end - slice.begin);
  }
}

}  // namespace tierzero::checkpoint
