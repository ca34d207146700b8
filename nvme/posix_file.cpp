// Opening files for the engine: O_DIRECT with a buffered fallback, preallocation, alignment.
#include "nvme/internal/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <mutex>
#include <set>

namespace tierzero::nvme {

PosixFile::PosixFile(std::string path, int fd, int buffered_fd, bool direct, DioAlignment align)
    : path_(std::move(path)), fd_(fd), buffered_fd_(buffered_fd), direct_(direct), align_(align) {}

PosixFile::~PosixFile() {
  for (auto& hook : close_hooks_) hook();
  if (buffered_fd_ != fd_) ::close(buffered_fd_);
  ::close(fd_);
}

void PosixFile::on_close(std::function<void()> hook) {
  std::lock_guard lock(hooks_mu_);
  close_hooks_.push_back(std::move(hook));
}

Result<uint64_t> PosixFile::size() const {
  struct stat st {};
  if (fstat(fd_, &st) != 0) return errno_status(errno, "cannot stat " + path_);
  return static_cast<uint64_t>(st.st_size);
}

Status PosixFile::sync() {
  if (fdatasync(fd_) != 0) return errno_status(errno, "fdatasync of " + path_ + " failed; the data may not be durable");
  return {};
}

Status PosixFile::truncate(uint64_t bytes) {
  if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    return errno_status(errno, "cannot set the size of " + path_ + " to " + std::to_string(bytes) + " bytes");
  }
  return {};
}

namespace {

int open_flags(OpenMode mode) {
  switch (mode) {
    case OpenMode::kRead: return O_RDONLY;
    case OpenMode::kWrite: return O_WRONLY | O_CREAT | O_TRUNC;
    case OpenMode::kReadWrite: return O_RDWR | O_CREAT;
  }
  return O_RDONLY;
}

Status open_error(int err, const std::string& path, OpenMode mode) {
  const bool creating = mode != OpenMode::kRead;
  std::string what = (creating ? "cannot create " : "cannot open ") + path;
  Status s = errno_status(err, what);
  std::string hint;
  if (err == ENOENT)
    hint = creating ? "; check that the directory exists" : "; check the path";
  else if (err == EACCES || err == EPERM || err == EROFS || err == ENOTDIR || err == EISDIR)
    hint = creating ? "; choose a writable path" : "; check the path and its permissions";
  return Status(s.code(), s.message() + hint);
}

// One notice per file system (device) and process, so a tmpfs run says it once.
void notice_buffered_fallback(int fd, const std::string& path) {
  static std::mutex mu;
  static std::set<dev_t> told;
  struct stat st {};
  fstat(fd, &st);
  std::lock_guard lock(mu);
  if (told.insert(st.st_dev).second) {
    std::fprintf(stderr, "tierzero: nvme: the file system of %s refuses O_DIRECT; using buffered I/O there\n",
                 path.c_str());
  }
}

}  // namespace

Result<FileRef> open_posix_file(const std::string& path, const OpenOptions& options, bool want_direct) {
  const int flags = open_flags(options.mode) | O_CLOEXEC;
  const bool direct_asked = want_direct && options.direct;
  int fd = -1;
  bool direct = false;
  if (direct_asked) {
    fd = ::open(path.c_str(), flags | O_DIRECT, 0644);
    direct = fd >= 0;
    if (fd < 0 && errno != EINVAL) return open_error(errno, path, options.mode);
  }
  if (fd < 0) {
    fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return open_error(errno, path, options.mode);
    if (direct_asked) notice_buffered_fallback(fd, path);
  }
  int buffered_fd = fd;
  if (direct) {
    buffered_fd = ::open(path.c_str(), (flags & ~(O_CREAT | O_TRUNC)) | O_CLOEXEC);
    if (buffered_fd < 0) {
      const int err = errno;
      ::close(fd);
      return open_error(err, path, options.mode);
    }
  }
  auto file =
      std::make_shared<PosixFile>(path, fd, buffered_fd, direct, direct ? probe_dio_alignment(fd) : DioAlignment{});
  if (options.mode != OpenMode::kRead && options.preallocate_bytes > 0) {
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(options.preallocate_bytes)) != 0 &&
        errno != EOPNOTSUPP) {
      return errno_status(errno, "cannot preallocate " + std::to_string(options.preallocate_bytes) + " bytes for " +
                                     path + "; free space on that disk or choose another path");
    }
  }
  return FileRef(std::move(file));
}

}  // namespace tierzero::nvme
