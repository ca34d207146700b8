#include "tests/support/scratch_dir.h"

#include <ftw.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tierzero::test_support {
namespace {

// What TIERZERO_KEEP_SCRATCH asks for.
enum class Keep { kNever, kFailed, kAll };

Keep keep_mode() {
  const char* env = std::getenv("TIERZERO_KEEP_SCRATCH");
  if (env == nullptr || *env == '\0' || std::strcmp(env, "0") == 0) return Keep::kNever;
  return std::strcmp(env, "all") == 0 ? Keep::kAll : Keep::kFailed;
}

}  // namespace

std::string temp_root() {
  const char* env = std::getenv("TMPDIR");
  return env != nullptr && *env != '\0' ? env : "/tmp";
}

std::string working_dir_root() {
  char buffer[4096];
  if (::getcwd(buffer, sizeof buffer) != nullptr && ::access(buffer, W_OK) == 0) return buffer;
  return temp_root();
}

std::string make_scratch_dir(std::string_view prefix, const std::string& root) {
  std::string path = root + "/" + std::string(prefix) + "-XXXXXX";
  if (::mkdtemp(path.data()) == nullptr) {
    throw std::runtime_error("cannot make a scratch directory " + path + ": " + std::strerror(errno));
  }
  return path;
}

bool remove_tree(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return true;
  const auto remove_one = [](const char* p, const struct stat*, int, FTW*) { return ::remove(p); };
  return ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

ScratchDir::ScratchDir(std::string_view prefix, const std::string& root) : path_(make_scratch_dir(prefix, root)) {}

ScratchDir::~ScratchDir() {
  const Keep keep = keep_mode();
  if (keep == Keep::kAll || (keep == Keep::kFailed && ::testing::Test::HasFailure())) {
    std::fprintf(stderr, "TIERZERO_KEEP_SCRATCH: kept %s\n", path_.c_str());
    return;
  }
  remove_tree(path_);
}

std::string ScratchDir::file(std::string_view name) const { return path_ + "/" + std::string(name); }

}  // namespace tierzero::test_support
