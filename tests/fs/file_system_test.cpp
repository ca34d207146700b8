// The real FileSystem: every call does what its contract says, and errors name the path.
#include <gtest/gtest.h>

#include <algorithm>

#include "fs/file_system.h"
#include "fs/testing/crash_harness.h"
#include "tests/support/status_matchers.h"

namespace tierzero::fs {
namespace {

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

class RealFs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        "fs_test_" + std::to_string(::getpid()) + "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(fs_.remove_tree(root_));
    ASSERT_TRUE(fs_.make_dir(root_).value());
  }
  void TearDown() override { EXPECT_OK(fs_.remove_tree(root_)); }
  FileSystem& fs_ = default_file_system();
  std::string root_;
};

TEST_F(RealFs, WritesSyncsRenamesListsAndRemoves) {
  auto file = fs_.create(root_ + "/a.tmp", WriteOptions{});
  ASSERT_OK(file);
  EXPECT_EQ((*file)->io_file(), nullptr);
  ASSERT_OK((*file)->append(bytes_of("hello ")));
  ASSERT_OK((*file)->append(bytes_of("world")));
  ASSERT_OK((*file)->sync());
  ASSERT_OK((*file)->close());
  EXPECT_ERROR((*file)->append(bytes_of("x")), ErrorCode::kInternal, "a.tmp is used after close()");
  ASSERT_OK(fs_.rename(root_ + "/a.tmp", root_ + "/a"));
  ASSERT_OK(fs_.sync_dir(root_));
  EXPECT_EQ(fs_.read_file(root_ + "/a").value(), "hello world");
  EXPECT_EQ(fs_.stat(root_ + "/a").value().size, 11u);
  EXPECT_FALSE(fs_.stat(root_ + "/a").value().is_dir);
  EXPECT_EQ(fs_.stat(root_ + "/a.tmp").status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(fs_.make_dir(root_ + "/d").value());
  EXPECT_FALSE(fs_.make_dir(root_ + "/d").value());  // already there
  ASSERT_OK(fs_.create(root_ + "/d/x", WriteOptions{}));
  std::vector<std::string> names = fs_.list_dir(root_).value();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "d"}));
  ASSERT_OK(fs_.remove_tree(root_ + "/d"));
  ASSERT_OK(fs_.remove_tree(root_ + "/d"));  // missing is fine
  ASSERT_OK(fs_.remove_file(root_ + "/a"));
  EXPECT_EQ(fs_.remove_file(root_ + "/a").code(), ErrorCode::kNotFound);
  EXPECT_TRUE(fs_.list_dir(root_).value().empty());
  const SpaceInfo space = fs_.free_space(root_).value();
  EXPECT_GT(space.total_bytes, 0u);
  EXPECT_LE(space.available_bytes, space.total_bytes);
}

TEST_F(RealFs, EngineFilesTakeNvmeRequestsAndAppends) {
  auto engine = nvme::IoEngine::create(nvme::IoConfig{});
  ASSERT_OK(engine);
  WriteOptions options;
  options.engine = engine->get();
  options.preallocate_bytes = 1 << 20;
  auto file = fs_.create(root_ + "/big", options);
  ASSERT_OK(file);
  ASSERT_NE((*file)->io_file(), nullptr);
  nvme::AlignedBuffer block = nvme::allocate_aligned(4096);
  std::fill_n(block.get(), 4096, std::byte{7});
  ASSERT_OK(nvme::write_sync(**engine, (*file)->io_file(), 0, block.get(), 4096));
  ASSERT_OK((*file)->truncate(4096));
  ASSERT_OK((*file)->sync());
  ASSERT_OK((*file)->close());
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
