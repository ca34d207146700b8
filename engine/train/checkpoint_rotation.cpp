#include "engine/train/internal/checkpoint_rotation.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace tierzero::engine::trainer {
namespace {

constexpr std::string_view kTagPrefix = "global_step";
constexpr std::string_view kRemovingSuffix = ".removing";
constexpr std::string_view kPartialSuffix = ".partial";

// N for a name "global_stepN" (digits only after the prefix), else -1.
int64_t iteration_of(std::string_view name) {
  if (!name.starts_with(kTagPrefix) || name.size() == kTagPrefix.size()) return -1;
  int64_t n = 0;
  for (char c : name.substr(kTagPrefix.size())) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n;
}

Status sync_dir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return io_error("cannot open " + dir + " to sync it: " + std::strerror(errno));
  const int rc = fsync(fd);
  const int saved = errno;
  close(fd);
  return rc == 0 ? Status() : io_error("fsync of directory " + dir + " failed: " + std::strerror(saved));
}

// Removes `path` and everything below it (nftw: libtorch.so's std::filesystem::remove_all crashes).
Status remove_tree(const std::string& path) {
  const int rc = nftw(
      path.c_str(), [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); }, 16, FTW_DEPTH | FTW_PHYS);
  if (rc != 0) return io_error("cannot remove " + path + ": " + std::strerror(errno) + "; remove it by hand");
  return Status();
}

// The paths DIR/NAME of the entries of `dir` whose name `matches`, in name order (none when `dir`
// cannot be read).
template <typename Predicate>
std::vector<std::string> entries_where(const std::string& dir, Predicate matches) {
  std::vector<std::string> paths;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return paths;
  while (const dirent* entry = readdir(d)) {
    const std::string_view name = entry->d_name;
    if (matches(name)) paths.push_back(dir + "/" + std::string(name));
  }
  closedir(d);
  std::sort(paths.begin(), paths.end());
  return paths;
}

}  // namespace

std::string latest_tag(const std::string& dir) {
  std::ifstream in(dir + "/latest");
  std::string tag;
  std::getline(in, tag);
  return tag;
}

Result<std::vector<std::string>> remove_unfinished_saves(const std::string& dir) {
  const std::vector<std::string> partials =
      entries_where(dir, [](std::string_view name) { return name.ends_with(kPartialSuffix); });
  for (const std::string& path : partials) TZ_RETURN_IF_ERROR(remove_tree(path));
  return partials;
}

std::vector<int64_t> saved_iterations(const std::string& dir) {
  std::vector<int64_t> iterations;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return iterations;
  while (const dirent* entry = readdir(d)) {
    const int64_t n = iteration_of(entry->d_name);
    if (n >= 0) iterations.push_back(n);
  }
  closedir(d);
  std::sort(iterations.begin(), iterations.end());
  return iterations;
}

int64_t checkpoints_added_at_once(int64_t existing, int64_t saves, int64_t keep_last) {
  int64_t held = existing, peak = 0;
  for (int64_t i = 0; i < saves; ++i) {
    peak = std::max(peak, ++held - existing);  // the new one written beside all that is kept
    if (keep_last > 0) held = std::min(held, keep_last);
  }
  return peak;
}

Status retire_old_checkpoints(const std::string& dir, int64_t keep_last) {
  const std::vector<int64_t> iterations = saved_iterations(dir);
  if (keep_last <= 0 || static_cast<int64_t>(iterations.size()) <= keep_last) return Status();
  const std::string latest = latest_tag(dir);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < iterations.size(); ++i) {
    const std::string tag = std::string(kTagPrefix) + std::to_string(iterations[i]);
    if (tag == latest) continue;
    const std::string path = dir + "/" + tag;
    const std::string removing = path + std::string(kRemovingSuffix);
    if (::rename(path.c_str(), removing.c_str()) != 0)
      return io_error("cannot rename " + path + " to " + removing + ": " + std::strerror(errno));
    TZ_RETURN_IF_ERROR(sync_dir(dir));
  }
  return Status();
}

Status remove_retired_checkpoints(const std::string& dir) {
  for (const std::string& path : entries_where(dir, [](std::string_view name) {
         return name.ends_with(kRemovingSuffix) &&
                iteration_of(name.substr(0, name.size() - kRemovingSuffix.size())) >= 0;
       }))
    TZ_RETURN_IF_ERROR(remove_tree(path));
  return Status();
}

}  // namespace tierzero::engine::trainer
