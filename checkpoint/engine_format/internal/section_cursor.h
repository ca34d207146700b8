// Private: sequential reading of one section of a rank file, decompressing a zstd section and
// checking the section's XXH3 once its last byte is read.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <zstd.h>

#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {

// An open rank file, shared by the cursors of its sections.
class RankFileHandle {
 public:
  // Opens `path` read-only. A missing file is kNotFound, a size other than `expected_bytes`
  // kCorrupt; both name the file and rank and say what to do.
  static Result<std::shared_ptr<RankFileHandle>> open(const std::string& path, uint32_t rank, uint32_t world_size,
                                                      uint64_t expected_bytes);
  ~RankFileHandle();
  // Reads exactly out.size() bytes at `offset`; a short file is kCorrupt ("truncated"). With
  // `hash`, the bytes also go into that XXH3 state, in order. A large range is read in pieces on
  // several cores, each piece hashed as soon as it and those before it are in (still in cache):
  // one pass over memory, and the hash overlaps the reads. Safe to call from several threads
  // (with distinct hash states).
  Status read_at(uint64_t offset, std::span<std::byte> out, XXH3_state_t* hash = nullptr) const;
  const std::string& path() const { return path_; }

 private:
  Status read_range(uint64_t offset, std::span<std::byte> out) const;
  RankFileHandle(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_;
};

class SectionCursor {
 public:
  // `what` names the section in errors, e.g. "/ckpt/step5/rank_00001.bin: rank 1 group 0 state 'fp32'".
  SectionCursor(std::shared_ptr<RankFileHandle> file, SectionRecord section, std::string what);
  ~SectionCursor();
  SectionCursor(const SectionCursor&) = delete;
  SectionCursor& operator=(const SectionCursor&) = delete;

  // Fills `out` with raw bytes [offset, offset + out.size()) of the section. Reading forward
  // streams; an offset behind the current position restarts from the section's start.
  Status read(uint64_t offset, std::span<std::byte> out);
  // Reads whatever is left and checks the checksum (once).
  Status finish();

 private:
  void restart();
  Status produce(std::span<std::byte> out);
  Status decompress(std::span<std::byte> out);
  Status fill_input();
  Status check_end();

  std::shared_ptr<RankFileHandle> file_;
  SectionRecord section_;
  std::string what_;
  uint64_t raw_pos_ = 0;
  uint64_t stored_pos_ = 0;
  bool checked_ = false;
  bool frame_done_ = false;
  XXH3_state_t* hash_;
  ZSTD_DCtx* dctx_ = nullptr;
  std::vector<std::byte> input_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
};

}  // namespace tierzero::checkpoint
