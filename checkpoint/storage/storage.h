// Private: a file written front to back through nvme::IoEngine (O_DIRECT where the file system
// allows it). Bytes are staged in `buffer_count` aligned buffers of `buffer_bytes`; a full buffer
// is submitted at once and the next one fills while it is written. Shared by the safetensors
// writer and the engine checkpoint's rank-file writer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "nvme/io_engine.h"

namespace tierzero::checkpoint {

class StreamWriter {
 public:
  struct Options {
    uint64_t buffer_bytes = 16ull << 20;  // a nonzero multiple of 4096
    uint32_t buffer_count = 4;            // >= 2
  };
  // Creates (truncates) `path` for writing; `preallocate_bytes` (0: none) are reserved up front and
  // become the file's size until finish() trims it to the bytes appended.
  // Errors name the path; bad options are kInvalidArgument.
  static Result<std::unique_ptr<StreamWriter>> create(nvme::IoEngine& engine, const std::string& path,
                                                      uint64_t preallocate_bytes, const Options& options);
  // Waits for writes still in flight (their buffers are owned here); does not sync.
  ~StreamWriter();
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Copies `bytes` to the end of the file.
  Status append(std::span<const std::byte> bytes);
  // The free, writable tail of the staging buffer (never empty): fill a prefix of it, then
  // commit() that many bytes. Lets callers produce bytes in place (conversion, compression)
  // instead of through a copy. The span is valid until the next call on the writer.
  Result<std::span<std::byte>> reserve();
  // Appends the first `bytes` bytes of the span reserve() returned.
  Status commit(uint64_t bytes);
  // Writes what is staged, waits for every write and fdatasyncs; the bytes are durable on ok.
  Status finish();
  // Bytes appended so far (the file's size once finished).
  uint64_t size() const { return flushed_ + filled_; }
  const std::string& path() const { return file_->path(); }

 private:
  StreamWriter(nvme::IoEngine& engine, nvme::FileRef file, const Options& options);
  // Submits the staging buffer and moves to the next one, waiting for that one's previous write.
  Status flush_current();
  nvme::IoEngine& engine_;
  nvme::FileRef file_;
  Options options_;
  std::vector<nvme::AlignedBuffer> buffers_;
  std::vector<nvme::IoTicket> in_flight_;
  size_t current_ = 0;
  uint64_t filled_ = 0;   // bytes staged in buffers_[current_]
  uint64_t flushed_ = 0;  // file offset of buffers_[current_]'s first byte
  uint64_t preallocated_ = 0;  // the size the file was given at create()
};

}  // namespace tierzero::checkpoint
