#include "checkpoint/storage/internal/stream_digest.h"
#include "checkpoint/storage/internal/sync_sites.h"
#include "checkpoint/storage/storage.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace tierzero::checkpoint {

StreamWriter::StreamWriter(nvme::IoEngine& engine, std::unique_ptr<fs::WritableFile> file, const Options& options)
    : engine_(engine), file_(std::move(file)), options_(options) {
  if (options_.borrowed != nullptr) {
    options_.buffer_bytes = options_.borrowed->buffer_bytes();
    options_.buffer_count = options_.borrowed->count();
    for (uint32_t i = 0; i < options_.buffer_count; ++i) buffers_.push_back(options_.borrowed->buffer(i));
  } else {
    for (uint32_t i = 0; i < options_.buffer_count; ++i) {
      owned_.push_back(nvme::allocate_aligned(options_.buffer_bytes));
      buffers_.push_back(owned_.back().get());
    }
  }
  in_flight_.resize(options_.buffer_count);
  if (options_.hashed) {
    digest_ = std::make_unique<StreamDigest>();
    digest_ends_.resize(options_.buffer_count, 0);
  }
}

StreamWriter::~StreamWriter() {
  digest_.reset();  // its thread stopped: it reads the buffers no more
  for (const nvme::IoTicket& t : in_flight_) {
    if (t.valid()) (void)t.wait();  // buffers must outlive their writes
  }
}

Result<std::unique_ptr<StreamWriter>> StreamWriter::create(fs::FileSystem& fs, nvme::IoEngine& engine,
                                                           const std::string& path, uint64_t preallocate_bytes,
                                                           const Options& options) {
  const bool own_buffers_bad = options.borrowed == nullptr && (options.buffer_count < 2 || options.buffer_bytes == 0 ||
                                                               options.buffer_bytes % 4096 != 0);
  if (own_buffers_bad) {
    return invalid_argument(
        fmt::format("writing {}: needs >= 2 buffers of a nonzero multiple of 4096 bytes "
                    "(got {} of {})",
                    path, options.buffer_count, options.buffer_bytes));
  }
  fs::WriteOptions write_options;
  write_options.engine = &engine;
  write_options.preallocate_bytes = preallocate_bytes;
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<fs::WritableFile> file, fs.create(path, write_options));
  // The file's size is set up front: on ext4 and xfs a direct write past the end of the file
  // (i_size) is an extending write, which takes the inode lock exclusively and completes
  // synchronously, so writes in flight would run one at a time; inside i_size they run together.
  if (preallocate_bytes > 0) TZ_RETURN_IF_ERROR(file->truncate(preallocate_bytes));
  auto writer = std::unique_ptr<StreamWriter>(new StreamWriter(engine, std::move(file), options));
  writer->preallocated_ = preallocate_bytes;
  return writer;
}

Status StreamWriter::append(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    TZ_ASSIGN_OR_RETURN(std::span<std::byte> free, reserve());
    const uint64_t n = std::min<uint64_t>(bytes.size(), free.size());
    std::memcpy(free.data(), bytes.data(), n);
    TZ_RETURN_IF_ERROR(commit(n));
    bytes = bytes.subspan(n);
  }
  return {};
}

Result<std::span<std::byte>> StreamWriter::reserve() {
  if (filled_ == options_.buffer_bytes) TZ_RETURN_IF_ERROR(flush_current());
  return std::span(buffers_[current_] + filled_, options_.buffer_bytes - filled_);
}

Status StreamWriter::commit(uint64_t bytes) {
  if (bytes > options_.buffer_bytes - filled_) {
    return internal_error(fmt::format("{}: committed {} bytes, more than the {} reserved", path(), bytes,
                                      options_.buffer_bytes - filled_));
  }
  filled_ += bytes;
  return {};
}

Status StreamWriter::flush_current() {
  if (filled_ > 0) {
    nvme::IoRequest request;
    request.file = file_->io_file();
    request.op = nvme::Op::kWrite;
    request.offset = flushed_;
    request.buffer = buffers_[current_];
    request.length = filled_;
    in_flight_[current_] = engine_.submit(std::move(request));
    if (digest_ != nullptr) {
      digest_->hash(flushed_, {buffers_[current_], filled_});
      digest_ends_[current_] = flushed_ + filled_;
    }
    flushed_ += filled_;
    filled_ = 0;
  }
  current_ = (current_ + 1) % buffers_.size();
  nvme::IoTicket previous = std::exchange(in_flight_[current_], nvme::IoTicket());
  if (digest_ != nullptr) digest_->hashed_through(digest_ends_[current_]);
  return previous.valid() ? previous.wait() : Status();
}

size_t StreamWriter::begin_range() { return digest_->open_range(size()); }

void StreamWriter::end_range(size_t id) { digest_->close_range(id, size()); }

uint64_t StreamWriter::file_digest() const { return digest_->file_digest(); }

uint64_t StreamWriter::range_digest(size_t id) const { return digest_->range_digest(id); }

Status StreamWriter::finish() {
  TZ_RETURN_IF_ERROR(flush_current());
  for (nvme::IoTicket& ticket : in_flight_) {
    if (ticket.valid()) TZ_RETURN_IF_ERROR(std::exchange(ticket, nvme::IoTicket()).wait());
  }
  if (digest_ != nullptr) digest_->hashed_through(size());
  if (size() < preallocated_) TZ_RETURN_IF_ERROR(file_->truncate(size()));
  if (sync_enabled(SyncSite::kStreamedFile)) TZ_RETURN_IF_ERROR(file_->sync());
  return file_->close();
}

}  // namespace tierzero::checkpoint
