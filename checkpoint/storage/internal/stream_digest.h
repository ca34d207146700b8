// Private: a stream's XXH3 digests, taken from its staging buffers on a thread of its own, in file
// order, behind the fill (StreamWriter::Options::hashed): the whole file's, and those of the byte
// ranges the writer marks as the file grows (a rank file's sections). The fill hands each buffer over
// as it submits it and reuses the buffer only once the digest has passed it, so hashing costs the
// fill nothing while the digest keeps up with the disk (it runs at several times a disk's rate).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <mutex>
#include <span>
#include <thread>

#include "checkpoint/storage/internal/xxh3.h"

namespace tierzero::checkpoint {

class StreamDigest {
 public:
  // Starts the hashing thread.
  StreamDigest();
  // Stops the thread after the piece it is on (bytes handed over and not hashed yet are dropped).
  ~StreamDigest();
  StreamDigest(const StreamDigest&) = delete;
  StreamDigest& operator=(const StreamDigest&) = delete;

  // The file's bytes [offset, offset + bytes.size()), handed over in file order (offset = the end of
  // the previous piece); `bytes` stay readable until hashed_through(offset + bytes.size()) returns.
  void hash(uint64_t offset, std::span<const std::byte> bytes);
  // Returns once every byte before `end` is hashed.
  void hashed_through(uint64_t end);
  // Starts a range at file offset `begin` (>= the end of every earlier range, and no byte at or past
  // `begin` handed over yet); returns its id (0, 1, ... in order).
  size_t open_range(uint64_t begin);
  // Ends range `id` at `end`, before any byte at or past `end` is handed over.
  void close_range(size_t id, uint64_t end);
  // The XXH3 of every byte handed over / of range `id`'s bytes: call after hashed_through() of the
  // file's size (resp. the range's end).
  uint64_t file_digest();
  uint64_t range_digest(size_t id);

 private:
  struct Range {
    uint64_t begin = 0;
    uint64_t end = std::numeric_limits<uint64_t>::max();  // open
    XXH3_state_t* state = nullptr;
  };
  struct Piece {
    uint64_t offset;
    std::span<const std::byte> bytes;
  };
  void run();
  // Hashes `bytes`, file offset `offset`, into the file's digest and the ranges they meet.
  void hash_now(uint64_t offset, std::span<const std::byte> bytes);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Piece> queue_;
  std::deque<Range> ranges_;  // in file order; a deque: references stay valid as it grows
  size_t first_open_ = 0;     // ranges before it end at or before what is hashed
  uint64_t hashed_end_ = 0;
  bool stopping_ = false;
  XXH3_state_t* file_state_;
  std::thread thread_;
};

}  // namespace tierzero::checkpoint
