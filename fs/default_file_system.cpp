// default_file_system() and the test override behind it; the pure path helpers.
#include <atomic>

#include "fs/internal/posix_file_system.h"
#include "fs/testing/default_override.h"

namespace tierzero::fs {
namespace {

std::atomic<FileSystem*> g_override{nullptr};

}  // namespace

FileSystem& default_file_system() {
  static PosixFileSystem posix;
  FileSystem* installed = g_override.load(std::memory_order_acquire);
  return installed != nullptr ? *installed : posix;
}

std::string strip_trailing_slashes(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

std::string parent_dir(const std::string& path) {
  const std::string p = strip_trailing_slashes(path);
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : p.substr(0, slash);
}

namespace testing {

ScopedDefaultFileSystem::ScopedDefaultFileSystem(FileSystem& fs)
    : previous_(g_override.exchange(&fs, std::memory_order_acq_rel)) {}

ScopedDefaultFileSystem::~ScopedDefaultFileSystem() { g_override.store(previous_, std::memory_order_release); }

}  // namespace testing
}  // namespace tierzero::fs
