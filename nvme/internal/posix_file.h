// The engine's File: a POSIX descriptor (O_DIRECT when allowed) plus a buffered twin.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "nvme/internal/alignment.h"
#include "nvme/io_engine.h"

namespace tierzero::nvme {

class PosixFile final : public File {
 public:
  // Takes ownership of `fd` and, when different, `buffered_fd`.
  PosixFile(std::string path, int fd, int buffered_fd, bool direct, DioAlignment align);
  ~PosixFile() override;
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;

  const std::string& path() const override { return path_; }
  int fd() const override { return fd_; }
  bool direct() const override { return direct_; }
  uint32_t mem_align() const override { return align_.mem; }
  uint32_t offset_align() const override { return align_.offset; }
  Result<uint64_t> size() const override;
  Status sync() override;
  Status truncate(uint64_t bytes) override;

  // A descriptor of the same file without O_DIRECT (fd() itself when the file is buffered):
  // writes of bytes that do not fill whole alignment blocks go through it, exactly, so the
  // neighbouring bytes on disk are never touched.
  int buffered_fd() const { return buffered_fd_; }

  // Adds a hook run when the file closes, before its descriptors do: an io_uring ring that
  // registered a descriptor drops it then, so a reused descriptor number never reaches the old file.
  void on_close(std::function<void()> hook);

 private:
  std::mutex hooks_mu_;
  std::vector<std::function<void()>> close_hooks_;
  std::string path_;
  int fd_;
  int buffered_fd_;
  bool direct_;
  DioAlignment align_;
};

// Opens `path` per `options`; O_DIRECT only when `want_direct`. Where the file system refuses
// O_DIRECT the file opens buffered and one notice per file system goes to stderr. Write modes
// fallocate `options.preallocate_bytes` (keeping the size) where the file system supports it.
// Errors name the path, the errno text and what to do.
Result<FileRef> open_posix_file(const std::string& path, const OpenOptions& options, bool want_direct);

}  // namespace tierzero::nvme
