// The real FileSystem: POSIX calls (nftw for trees: std::filesystem::remove_all is not used because
// libtorch.so exports broken copies of it that the dynamic linker may bind in LibTorch programs).
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

#include "fs/internal/posix_file_system.h"

namespace tierzero::fs {

Result<std::unique_ptr<WritableFile>> PosixFileSystem::create(const std::string& path, const WriteOptions& options) {
  return create_posix_file(path, options);
}

Result<std::string> PosixFileSystem::read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open {}", path));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return errno_status(err, fmt::format("reading {} at offset {}", path, text.size()));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

Status PosixFileSystem::rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return errno_status(errno, fmt::format("rename {} -> {}", from, to));
  return {};
}

Status PosixFileSystem::sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open directory {} to fsync it", dir));
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  if (err != 0)
    return errno_status(err, fmt::format("fsync of directory {} failed; its entries may not be durable", dir));
  return {};
}

Result<bool> PosixFileSystem::make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) return true;
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return false;
  return errno_status(err,
                      fmt::format("cannot create directory {}; check that its parent exists and is writable", dir));
}

Status PosixFileSystem::remove_file(const std::string& path) {
  if (std::remove(path.c_str()) != 0) return errno_status(errno, fmt::format("cannot remove {}", path));
  return {};
}

Status PosixFileSystem::remove_tree(const std::string& path) {
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

Result<std::vector<std::string>> PosixFileSystem::list_dir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno_status(errno, fmt::format("cannot list directory {}", dir));
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

Result<FileInfo> PosixFileSystem::stat(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno_status(errno, fmt::format("cannot stat {}", path));
  return FileInfo{S_ISDIR(st.st_mode), static_cast<uint64_t>(st.st_size)};
}

Result<SpaceInfo> PosixFileSystem::free_space(const std::string& path) {
  struct statvfs vfs {};
  if (::statvfs(path.c_str(), &vfs) != 0) return errno_status(errno, fmt::format("statvfs {}", path));
  return SpaceInfo{static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize,
                   static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize};
}

}  // namespace tierzero::fs
