// The real WritableFile: an nvme::File opened by an IoEngine (appends go through the engine), or
// a plain buffered descriptor (appends are pwrite calls).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "fs/internal/posix_file_system.h"

namespace tierzero::fs {
namespace {

Status write_error(int err, const std::string& path, uint64_t offset) {
  if (err == ENOSPC || err == EDQUOT) {
    return out_of_space(
        fmt::format("writing {} at offset {}: no space left on device; free space there or choose "
                    "another directory",
                    path, offset));
  }
  return errno_status(err, fmt::format("writing {} at offset {}", path, offset));
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd, nvme::IoEngine* engine, nvme::FileRef io_file)
      : path_(std::move(path)), fd_(fd), engine_(engine), io_file_(std::move(io_file)) {}
  ~PosixWritableFile() override { (void)close(); }

  const std::string& path() const override { return path_; }
  const nvme::FileRef& io_file() const override { return io_file_; }

  Status append(std::span<const std::byte> bytes) override {
    TZ_RETURN_IF_ERROR(check_open());
    if (io_file_) {
      TZ_RETURN_IF_ERROR(nvme::write_sync(*engine_, io_file_, offset_, bytes.data(), bytes.size()));
      offset_ += bytes.size();
      return {};
    }
    while (!bytes.empty()) {
      const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset_));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return write_error(errno, path_, offset_);
      offset_ += static_cast<uint64_t>(n);
      bytes = bytes.subspan(static_cast<size_t>(n));
    }
    return {};
  }

  Status truncate(uint64_t bytes) override {
    TZ_RETURN_IF_ERROR(check_open());
    if (io_file_) return io_file_->truncate(bytes);
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
      return errno_status(errno, fmt::format("cannot set the size of {} to {} bytes", path_, bytes));
    }
    return {};
  }

  Status sync() override {
    TZ_RETURN_IF_ERROR(check_open());
    if (io_file_) return io_file_->sync();
    if (::fdatasync(fd_) != 0) {
      return errno_status(errno, fmt::format("fdatasync of {} failed; its data may not be durable", path_));
    }
    return {};
  }

  Status close() override {
    io_file_.reset();  // the engine's file closes when its last request lets go of it
    const int fd = std::exchange(fd_, -1);
    if (fd >= 0 && ::close(fd) != 0) return errno_status(errno, fmt::format("close {}", path_));
    return {};
  }

 private:
  Status check_open() const {
    if (fd_ < 0 && !io_file_) return internal_error(fmt::format("{} is used after close()", path_));
    return {};
  }
  std::string path_;
  int fd_;  // -1 for engine files
  nvme::IoEngine* engine_;
  nvme::FileRef io_file_;
  uint64_t offset_ = 0;
};

}  // namespace

Result<std::unique_ptr<WritableFile>> create_posix_file(const std::string& path, const WriteOptions& options) {
  if (options.engine != nullptr) {
    nvme::OpenOptions open;
    open.mode = nvme::OpenMode::kWrite;
    open.preallocate_bytes = options.preallocate_bytes;
    TZ_ASSIGN_OR_RETURN(nvme::FileRef file, options.engine->open(path, open));
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, -1, options.engine, std::move(file)));
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return errno_status(errno, fmt::format("cannot create {}; check that its directory exists and is writable", path));
  }
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd, nullptr, nullptr));
}

}  // namespace tierzero::fs
