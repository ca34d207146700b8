// The real FileSystem: every call does what its contract says, and errors name the path.
#include <gtest/gtest.h>

#include <algorithm>

#include "fs/file_system.h"
#include "fs/testing/crash_harness.h"

namespace tierzero::fs {
namespace {

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

class RealFs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = "fs_test_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(fs_.remove_tree(root_).ok());
    ASSERT_TRUE(fs_.make_dir(root_).value());
  }
  void TearDown() override { EXPECT_TRUE(fs_.remove_tree(root_).ok()); }
  FileSystem& fs_ = default_file_system();
  std::string root_;
};

TEST_F(RealFs, WritesSyncsRenamesListsAndRemoves) {
  auto file = fs_.create(root_ + "/a.tmp", WriteOptions{});
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ((*file)->io_file(), nullptr);
  ASSERT_TRUE((*file)->append(bytes_of("hello ")).ok());
  ASSERT_TRUE((*file)->append(bytes_of("world")).ok());
  ASSERT_TRUE((*file)->sync().ok());
  ASSERT_TRUE((*file)->close().ok());
  EXPECT_FALSE((*file)->append(bytes_of("x")).ok());
  ASSERT_TRUE(fs_.rename(root_ + "/a.tmp", root_ + "/a").ok());
  ASSERT_TRUE(fs_.sync_dir(root_).ok());
  EXPECT_EQ(fs_.read_file(root_ + "/a").value(), "hello world");
  EXPECT_EQ(fs_.stat(root_ + "/a").value().size, 11u);
  EXPECT_FALSE(fs_.stat(root_ + "/a").value().is_dir);
  EXPECT_EQ(fs_.stat(root_ + "/a.tmp").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(fs_.make_dir(root_ + "/d").value());
  EXPECT_FALSE(fs_.make_dir(root_ + "/d").value());  // already there
  ASSERT_TRUE(fs_.create(root_ + "/d/x", WriteOptions{}).ok());
  std::vector<std::string> names = fs_.list_dir(root_).value();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "d"}));
  ASSERT_TRUE(fs_.remove_tree(root_ + "/d").ok());
  ASSERT_TRUE(fs_.remove_tree(root_ + "/d").ok());  // missing is fine
  ASSERT_TRUE(fs_.remove_file(root_ + "/a").ok());
  EXPECT_EQ(fs_.remove_file(root_ + "/a").code(), ErrorCode::kNotFound);
  EXPECT_TRUE(fs_.list_dir(root_).value().empty());
  const SpaceInfo space = fs_.free_space(root_).value();
  EXPECT_GT(space.total_bytes, 0u);
  EXPECT_LE(space.available_bytes, space.total_bytes);
}

TEST_F(RealFs, EngineFilesTakeNvmeRequestsAndAppends) {
  auto engine = nvme::IoEngine::create(nvme::IoConfig{});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  WriteOptions options;
  options.engine = engine->get();
  options.preallocate_bytes = 1 << 20;
  auto file = fs_.create(root_ + "/big", options);
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_NE((*file)->io_file(), nullptr);
  nvme::AlignedBuffer block = nvme::allocate_aligned(4096);
  std::fill_n(block.get(), 4096, std::byte{7});
  ASSERT_TRUE(nvme::write_sync(**engine, (*file)->io_file(), 0, block.get(), 4096).ok());
  ASSERT_TRUE((*file)->truncate(4096).ok());
  ASSERT_TRUE((*file)->sync().ok());
  ASSERT_TRUE((*file)->close().ok());
  const std::string text = fs_.read_file(root_ + "/big").value();
  EXPECT_EQ(text, std::string(4096, '\7'));
}

TEST_F(RealFs, ErrorsNameThePath) {
  const std::string missing = root_ + "/no/such/file";
  const Status created = fs_.create(missing, WriteOptions{}).status();
  EXPECT_NE(created.message().find(missing), std::string::npos) << created.to_string();
  const Status renamed = fs_.rename(missing, root_ + "/x");
  EXPECT_NE(renamed.message().find(missing), std::string::npos) << renamed.to_string();
  const Status synced = fs_.sync_dir(root_ + "/no");
  EXPECT_NE(synced.message().find(root_ + "/no"), std::string::npos) << synced.to_string();
  EXPECT_EQ(fs_.read_file(missing).status().code(), ErrorCode::kNotFound);
}

TEST(PathHelpers, ParentDirAndTrailingSlashes) {
  EXPECT_EQ(parent_dir("a/b/c"), "a/b");
  EXPECT_EQ(parent_dir("a/b/"), "a");
  EXPECT_EQ(parent_dir("name"), ".");
  EXPECT_EQ(parent_dir("/x"), "/");
  EXPECT_EQ(strip_trailing_slashes("a//"), "a");
  EXPECT_EQ(strip_trailing_slashes("/"), "/");
}

}  // namespace
}  // namespace tierzero::fs
