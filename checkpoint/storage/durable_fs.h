// Private: the file-system calls of the checkpoint commit protocol, each announced to a FaultHook
// first so tests can fail any single step (see engine_checkpoint_writer.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "checkpoint/engine_format/engine_checkpoint.h"

namespace tierzero::checkpoint {

class DurableFs;

// A file being written sequentially. Closed by the destructor (without fsync) if not closed.
class WritableFile {
 public:
  WritableFile(WritableFile&& other) noexcept;
  WritableFile& operator=(WritableFile&&) = delete;
  ~WritableFile();
  // Writes all of `bytes` at the end of the file.
  Status append(std::span<const std::byte> bytes);
  // fdatasync.
  Status sync();
  // Closes the file; errors name it.
  Status close();
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  friend class DurableFs;
  WritableFile(const DurableFs& fs, std::string path, int fd) : fs_(&fs), path_(std::move(path)), fd_(fd) {}
  const DurableFs* fs_;
  std::string path_;
  int fd_;
  uint64_t size_ = 0;
};

class DurableFs {
 public:
  explicit DurableFs(FaultHook hook = {}) : hook_(std::move(hook)) {}

  // Creates (truncating) `path` for writing.
  Result<WritableFile> create(const std::string& path) const;
  // create + append + fsync + close.
  Status write_file(const std::string& path, std::span<const std::byte> bytes) const;
  // rename(2): atomically replaces `to`.
  Status rename(const std::string& from, const std::string& to) const;
  // Opens directory `dir` and fsyncs it, making renames and creations in it durable.
  Status sync_dir(const std::string& dir) const;
  // mkdir(2); an existing directory is fine.
  Status make_dir(const std::string& dir) const;
  // Removes `path` and everything under it; a missing path is fine.
  Status remove_all(const std::string& path) const;

  // Runs the hook for `step` on `path` (ok when there is none).
  Status announce(FsStep step, const std::string& path) const;

 private:
  FaultHook hook_;
};

}  // namespace tierzero::checkpoint
