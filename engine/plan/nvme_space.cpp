// The NVMe budget: the directories a config swaps to and the free space of their file systems.
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "engine/plan/plan.h"

namespace tierzero::engine {

std::vector<std::string> config_nvme_paths(const DsConfig& config) {
  std::vector<std::string> paths;
  const ZeroConfig& z = config.zero;
  auto add = [&](OffloadDevice device, const std::vector<std::string>& block) {
    if (device != OffloadDevice::kNvme) return;
    for (const std::string& path : block)
      if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  };
  add(z.offload_optimizer.device, z.offload_optimizer.nvme_paths);
  add(z.offload_param.device, z.offload_param.nvme_paths);
  return paths;
}

Result<uint64_t> nvme_free_bytes(const std::vector<std::string>& paths, const std::string& what) {
  std::set<std::pair<unsigned long, dev_t>> seen;  // (file system id, device): each counted once
  uint64_t total = 0;
  for (const std::string& path : paths) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT)
        return not_found(what + " " + path + " does not exist: create the directory (mkdir -p " + path + ") or point " +
                         what + " at an existing one on a fast local drive");
      return errno_status(errno, what + " " + path + ": cannot read it; give an existing, readable directory");
    }
    if (!S_ISDIR(st.st_mode))
      return invalid_argument(what + " " + path + " is not a directory: give the directory the swap files go in");
    struct statvfs vfs {};
    if (::statvfs(path.c_str(), &vfs) != 0)
      return errno_status(errno, what + " " + path + ": cannot read its file system's free space");
    if (seen.insert({vfs.f_fsid, st.st_dev}).second) total += static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  return total;
}

}  // namespace tierzero::engine
