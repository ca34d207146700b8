#include "checkpoint/storage/durable_fs.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

namespace tierzero::checkpoint {

const char* fs_step_name(FsStep step) {
  switch (step) {
    case FsStep::kMakeDir: return "mkdir";
    case FsStep::kCreate: return "create";
    case FsStep::kWrite: return "write";
    case FsStep::kSyncFile: return "fsync";
    case FsStep::kRename: return "rename";
    case FsStep::kSyncDir: return "fsync-dir";
    case FsStep::kRemove: return "remove";
  }
  return "?";
}

Status DurableFs::announce(FsStep step, const std::string& path) const {
  return hook_ ? hook_(step, path) : Status();
}

WritableFile::WritableFile(WritableFile&& other) noexcept
    : fs_(other.fs_), path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

WritableFile::~WritableFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status WritableFile::append(std::span<const std::byte> bytes) {
  TZ_RETURN_IF_ERROR(fs_->announce(FsStep::kWrite, path_));
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      return err == ENOSPC ? out_of_space(fmt::format("writing {}: no space left on device; free space or choose "
                                                      "another directory", path_))
                           : errno_status(err, fmt::format("writing {} at offset {}", path_, size_));
    }
    size_ += static_cast<uint64_t>(n);
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return {};
}

Status WritableFile::sync() {
  TZ_RETURN_IF_ERROR(fs_->announce(FsStep::kSyncFile, path_));
  if (::fdatasync(fd_) != 0) return errno_status(errno, fmt::format("fdatasync {}", path_));
  return {};
}

Status WritableFile::close() {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0) return errno_status(errno, fmt::format("close {}", path_));
  return {};
}

Result<WritableFile> DurableFs::create(const std::string& path) const {
  TZ_RETURN_IF_ERROR(announce(FsStep::kCreate, path));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(errno, fmt::format("cannot create {}; check the directory is writable", path));
  return WritableFile(*this, path, fd);
}

Status DurableFs::write_file(const std::string& path, std::span<const std::byte> bytes) const {
  TZ_ASSIGN_OR_RETURN(WritableFile file, create(path));
  TZ_RETURN_IF_ERROR(file.append(bytes));
  TZ_RETURN_IF_ERROR(file.sync());
  return file.close();
}

Status DurableFs::rename(const std::string& from, const std::string& to) const {
  TZ_RETURN_IF_ERROR(announce(FsStep::kRename, to));
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return errno_status(errno, fmt::format("rename {} -> {}", from, to));
  }
  return {};
}

Status DurableFs::sync_dir(const std::string& dir) const {
  TZ_RETURN_IF_ERROR(announce(FsStep::kSyncDir, dir));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("open directory {}", dir));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return errno_status(err, fmt::format("fsync directory {}", dir));
  return {};
}

Status DurableFs::make_dir(const std::string& dir) const {
  TZ_RETURN_IF_ERROR(announce(FsStep::kMakeDir, dir));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return errno_status(errno, fmt::format("cannot create directory {}; check the parent exists and is writable", dir));
  }
  return {};
}

Status DurableFs::remove_all(const std::string& path) const {
  TZ_RETURN_IF_ERROR(announce(FsStep::kRemove, path));
  // nftw, not std::filesystem: checkpoint code runs in LibTorch-linked programs, and libtorch.so
  // exports broken copies of std::filesystem::remove_all that the dynamic linker may bind.
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? Status() : errno_status(errno, fmt::format("cannot remove {}", path));
  }
  const int rc = ::nftw(
      path.c_str(), [](const char* p, const struct stat*, int, FTW*) { return std::remove(p) == 0 ? 0 : -1; }, 16,
      FTW_DEPTH | FTW_PHYS);
  if (rc != 0) return errno_status(errno, fmt::format("cannot remove {}; check its permissions", path));
  return {};
}

}  // namespace tierzero::checkpoint
