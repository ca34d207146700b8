// The NVMe budget: which directories a config swaps to, and their free space with each file system
// counted once; missing or non-directory paths refused by name.
#include <gtest/gtest.h>
#include <sys/statvfs.h>

#include <fstream>

#include "plan_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

uint64_t statvfs_free(const std::string& dir) {
  struct statvfs vfs {};
  EXPECT_EQ(::statvfs(dir.c_str(), &vfs), 0) << dir;
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

TEST(NvmeSpace, ConfigPathsAreTheNvmeBlocksInOrderEachOnce) {
  DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": ["/a", "/b"]},
      "offload_param": {"device": "nvme", "nvme_path": "/b"}}})");
  EXPECT_EQ(config_nvme_paths(config), (std::vector<std::string>{"/a", "/b"}));
  config.zero.offload_param.nvme_paths = {"/c"};
  EXPECT_EQ(config_nvme_paths(config), (std::vector<std::string>{"/a", "/b", "/c"}));
  config.zero.offload_optimizer.device = OffloadDevice::kCpu;  // its paths no longer count
  EXPECT_EQ(config_nvme_paths(config), (std::vector<std::string>{"/c"}));
}

TEST(NvmeSpace, TwoDirectoriesOfOneFileSystemCountItOnce) {
  test_support::ScratchDir dir("nvme-space");
  const std::string a = dir.file("a"), b = dir.file("b");
  std::filesystem::create_directories(a);
  std::filesystem::create_directories(b);
  ASSERT_OK_AND_ASSIGN(uint64_t one, nvme_free_bytes({a}, "nvme_path"));
  ASSERT_OK_AND_ASSIGN(uint64_t both, nvme_free_bytes({a, b}, "nvme_path"));
  // Others write to this disk meanwhile: the figures agree within 64 MiB, not exactly.
  const uint64_t reference = statvfs_free(dir.path());
  EXPECT_NEAR(static_cast<double>(one), static_cast<double>(reference), 64.0 * (1 << 20));
  EXPECT_NEAR(static_cast<double>(both), static_cast<double>(reference), 64.0 * (1 << 20));
}

TEST(NvmeSpace, MissingDirectoryAndFileAreRefusedByName) {
  test_support::ScratchDir dir("nvme-space");
  const std::string missing = dir.file("not-made");
  EXPECT_ERROR(nvme_free_bytes({dir.path(), missing}, "zero_optimization.offload_optimizer.nvme_path"),
               ErrorCode::kNotFound, "zero_optimization.offload_optimizer.nvme_path " + missing + " does not exist");
  EXPECT_ERROR(nvme_free_bytes({missing}, "--nvme"), ErrorCode::kNotFound, "mkdir -p " + missing);
  const std::string file = dir.file("a-file");
  std::ofstream(file) << "x";
  EXPECT_ERROR(nvme_free_bytes({file}, "--nvme"), ErrorCode::kInvalidArgument,
               "--nvme " + file + " is not a directory");
}

}  // namespace
}  // namespace tierzero::engine
