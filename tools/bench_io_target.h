// Where `tierzero bench io` puts its file.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"

namespace tierzero::tools {

// The directory for a `size`-byte benchmark file: `requested` when given (it must exist, be
// writable and have room), else the first of the current directory, /var/tmp and /tmp that is
// writable, has room and is a real disk (not tmpfs/ramfs), else the first that is writable and
// has room. Errors say how much room is needed and which flag to change.
Result<std::string> choose_bench_dir(const std::string& requested, uint64_t size);

// True when `dir` is on tmpfs or ramfs (memory, not a disk).
bool is_memory_fs(const std::string& dir);

// Removes its path on destruction.
class ScopedPath {
 public:
  explicit ScopedPath(std::string path) : path_(std::move(path)) {}
  ~ScopedPath();
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tierzero::tools
