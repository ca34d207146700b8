// Choosing a disk for `tierzero bench io`.
#include "tools/bench_io_target.h"

#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "common/common.h"

namespace tierzero::tools {

namespace {

constexpr long kTmpfsMagic = 0x01021994;
constexpr long kRamfsMagic = 0x858458f6;
constexpr uint64_t kHeadroom = 64ull << 20;

uint64_t free_bytes(const std::string& dir) {
  struct statvfs sv {};
  if (statvfs(dir.c_str(), &sv) != 0) return 0;
  return static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
}

bool usable(const std::string& dir, uint64_t size) {
  return access(dir.c_str(), W_OK) == 0 && free_bytes(dir) >= size + kHeadroom;
}

}  // namespace

bool is_memory_fs(const std::string& dir) {
  struct statfs sf {};
  if (statfs(dir.c_str(), &sf) != 0) return false;
  return sf.f_type == kTmpfsMagic || static_cast<long>(sf.f_type) == kRamfsMagic;
}

Result<std::string> choose_bench_dir(const std::string& requested, uint64_t size) {
  if (!requested.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(requested, ec)) {
      return not_found("--path " + requested +
                       " is not a directory; give an existing directory on the disk to measure");
    }
    if (access(requested.c_str(), W_OK) != 0) {
      return errno_status(errno, "--path " + requested + " is not writable; choose a writable directory");
    }
    if (free_bytes(requested) < size + kHeadroom) {
      return out_of_space("--path " + requested + " has " + format_bytes(free_bytes(requested)) +
                          " free; the benchmark needs " + format_bytes(size + kHeadroom) +
                          ": lower --size or choose another --path");
    }
    return requested;
  }
  std::error_code ec;
  std::vector<std::string> candidates = {std::filesystem::current_path(ec).string(), "/var/tmp", "/tmp"};
  for (const std::string& dir : candidates) {
    if (!dir.empty() && usable(dir, size) && !is_memory_fs(dir)) return dir;
  }
  for (const std::string& dir : candidates) {
    if (!dir.empty() && usable(dir, size)) return dir;
  }
  return out_of_space("no writable directory among the current one, /var/tmp and /tmp has " +
                      format_bytes(size + kHeadroom) + " free: lower --size or give --path");
}

ScopedPath::~ScopedPath() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace tierzero::tools
