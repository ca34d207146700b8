#include "checkpoint/engine_format/internal/section_cursor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <mutex>

#include <fmt/format.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

namespace tierzero::checkpoint {
namespace {

constexpr uint64_t kInputChunk = 1 << 20;
constexpr size_t kReadPiece = 1 << 20;            // a large read's unit per core
constexpr uint64_t kParallelReadBytes = 8 << 20;  // reads at least this large are split over cores

}  // namespace

Result<std::shared_ptr<RankFileHandle>> RankFileHandle::open(const std::string& path, uint32_t rank,
                                                             uint32_t world_size, uint64_t expected_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    return not_found(
        fmt::format("missing rank file {} (rank {} of world size {}): the checkpoint is incomplete; "
                    "restore the file or load an earlier tag",
                    path, rank, world_size));
  }
  if (fd < 0) return errno_status(errno, fmt::format("cannot open rank file {}", path));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != expected_bytes) {
    ::close(fd);
    return corrupt(
        fmt::format("{}: rank {} file is {} bytes but the manifest records {}; it is truncated or was "
                    "replaced — restore it or load an earlier tag",
                    path, rank, st.st_size, expected_bytes));
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::shared_ptr<RankFileHandle>(new RankFileHandle(path, fd));
}

RankFileHandle::~RankFileHandle() { ::close(fd_); }

// One pread loop over [offset, offset + out.size()).
Status RankFileHandle::read_range(uint64_t offset, std::span<std::byte> out) const {
  while (!out.empty()) {
    const ssize_t n = ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_status(errno, fmt::format("reading {} at offset {}", path_, offset));
    if (n == 0) {
      return corrupt(
          fmt::format("{}: file ends at offset {} but the manifest says it is longer; the file is "
                      "truncated — restore it or load an earlier tag",
                      path_, offset));
    }
    offset += static_cast<uint64_t>(n);
    out = out.subspan(static_cast<size_t>(n));
  }
  return {};
}

Status RankFileHandle::read_at(uint64_t offset, std::span<std::byte> out, XXH3_state_t* hash) const {
  if (out.size() < kParallelReadBytes) {
    TZ_RETURN_IF_ERROR(read_range(offset, out));
    if (hash != nullptr) XXH3_64bits_update(hash, out.data(), out.size());
    return {};
  }
  // A large read (a whole tensor's piece) is split over cores: one thread's copy out of the page
  // cache is slower than the disk writes convert feeds. Pieces flow read (any order, in parallel)
  // -> hashed (in order), usually on the thread that read them.
  const size_t pieces = (out.size() + kReadPiece - 1) / kReadPiece;
  const auto piece = [&](size_t p) {
    return out.subspan(p * kReadPiece, std::min(kReadPiece, out.size() - p * kReadPiece));
  };
  size_t next = 0;
  std::mutex mu;
  Status first;  // the failure at the lowest offset, whatever order the pieces ran in
  uint64_t first_at = std::numeric_limits<uint64_t>::max();
  const auto issue = [&](tbb::flow_control& control) -> size_t {
    if (next == pieces) control.stop();
    return next++;
  };
  const auto read = [&](size_t p) {
    Status s = read_range(offset + p * kReadPiece, piece(p));
    std::lock_guard lock(mu);
    if (!s.ok() && p * kReadPiece < first_at) {
      first = s;
      first_at = p * kReadPiece;
    }
    return p;
  };
  const auto digest = [&](size_t p) {  // after a failure the hash is not used
    if (hash != nullptr) XXH3_64bits_update(hash, piece(p).data(), piece(p).size());
  };
  tbb::parallel_pipeline(2 * static_cast<size_t>(tbb::this_task_arena::max_concurrency()),
                         tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order, issue) &
                             tbb::make_filter<size_t, size_t>(tbb::filter_mode::parallel, read) &
                             tbb::make_filter<size_t, void>(tbb::filter_mode::serial_in_order, digest));
  return first;
}

SectionCursor::SectionCursor(std::shared_ptr<RankFileHandle> file, SectionRecord section, std::string what)
    : file_(std::move(file)), section_(section), what_(std::move(what)), hash_(XXH3_createState()) {
  restart();
}

SectionCursor::~SectionCursor() {
  XXH3_freeState(hash_);
  ZSTD_freeDCtx(dctx_);
}

void SectionCursor::restart() {
  raw_pos_ = 0;
  stored_pos_ = 0;
  checked_ = false;
  frame_done_ = false;
  XXH3_64bits_reset(hash_);
  in_ = {nullptr, 0, 0};
  if (section_.compressed) {
    if (dctx_ == nullptr) dctx_ = ZSTD_createDCtx();
    ZSTD_DCtx_reset(dctx_, ZSTD_reset_session_only);
    input_.resize(kInputChunk);
  }
}

Status SectionCursor::fill_input() {
  const uint64_t n = std::min<uint64_t>(kInputChunk, section_.stored_bytes - stored_pos_);
  TZ_RETURN_IF_ERROR(file_->read_at(section_.offset + stored_pos_, std::span(input_.data(), n)));
  stored_pos_ += n;
  in_ = {input_.data(), n, 0};
  return {};
}

Status SectionCursor::decompress(std::span<std::byte> out) {
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  const bool to_end = raw_pos_ + out.size() == section_.raw_bytes;
  while (ob.pos < ob.size || (to_end && !frame_done_)) {
    if (frame_done_) {
      return corrupt(
          fmt::format("{}: zstd frame ends after {} of its {} bytes; the file is damaged — restore it or "
                      "load an earlier tag",
                      what_, raw_pos_ + ob.pos, section_.raw_bytes));
    }
    if (in_.pos == in_.size) {
      if (stored_pos_ == section_.stored_bytes) {
        return corrupt(
            fmt::format("{}: zstd frame is cut short after {} of its {} bytes; the file is damaged — "
                        "restore it or load an earlier tag",
                        what_, raw_pos_ + ob.pos, section_.raw_bytes));
      }
      TZ_RETURN_IF_ERROR(fill_input());
    }
    const size_t in_before = in_.pos;
    const size_t out_before = ob.pos;
    const size_t ret = ZSTD_decompressStream(dctx_, &ob, &in_);
    if (ZSTD_isError(ret)) {
      return corrupt(
          fmt::format("{}: zstd frame damaged near stored byte {} ({}); the file is corrupt — restore it "
                      "or load an earlier tag",
                      what_, stored_pos_, ZSTD_getErrorName(ret)));
    }
    if (ret == 0) frame_done_ = true;
    if (!frame_done_ && in_.pos == in_before && ob.pos == out_before && in_.pos < in_.size) {
      return corrupt(fmt::format("{}: zstd frame holds more than the {} bytes recorded; the file is damaged", what_,
                                 section_.raw_bytes));
    }
  }
  return {};
}

Status SectionCursor::produce(std::span<std::byte> out) {
  if (section_.compressed) {
    TZ_RETURN_IF_ERROR(decompress(out));
    XXH3_64bits_update(hash_, out.data(), out.size());
  } else {
    TZ_RETURN_IF_ERROR(file_->read_at(section_.offset + raw_pos_, out, hash_));
  }
  raw_pos_ += out.size();
  if (raw_pos_ == section_.raw_bytes) return check_end();
  return {};
}

Status SectionCursor::check_end() {
  if (checked_) return {};
  checked_ = true;
  if (section_.compressed && (stored_pos_ != section_.stored_bytes || in_.pos != in_.size)) {
    return corrupt(fmt::format("{}: bytes follow the end of the zstd frame; the file is damaged", what_));
  }
  const uint64_t got = XXH3_64bits_digest(hash_);
  if (got != section_.xxh3) {
    return corrupt(
        fmt::format("{}: checksum mismatch (XXH3 {:016x}, manifest {:016x}); the data is damaged — "
                    "restore the file or load an earlier tag",
                    what_, got, section_.xxh3));
  }
  return {};
}

Status SectionCursor::read(uint64_t offset, std::span<std::byte> out) {
  if (offset + out.size() > section_.raw_bytes || offset + out.size() < offset) {
    return internal_error(fmt::format("{}: read of [{}, +{}) past the section's {} bytes", what_, offset, out.size(),
                                      section_.raw_bytes));
  }
  if (offset < raw_pos_) restart();
  std::vector<std::byte> scratch;
  while (raw_pos_ < offset) {
    scratch.resize(std::min<uint64_t>(kInputChunk, offset - raw_pos_));
    TZ_RETURN_IF_ERROR(produce(scratch));
  }
  return produce(out);
}

Status SectionCursor::finish() {
  std::vector<std::byte> scratch;
  while (raw_pos_ < section_.raw_bytes) {
    scratch.resize(std::min<uint64_t>(kInputChunk, section_.raw_bytes - raw_pos_));
    TZ_RETURN_IF_ERROR(produce(scratch));
  }
  return checked_ ? Status() : produce({});  // an empty section: consume its (empty) frame
}

}  // namespace tierzero::checkpoint
