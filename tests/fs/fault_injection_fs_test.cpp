// The crash-simulating double: what a power loss keeps (synced bytes, synced directory entries)
// and drops (everything else), its single-change images, and its injected faults.
#include <gtest/gtest.h>

#include "fs/file_system.h"
#include "fs/testing/crash_harness.h"
#include "fs/testing/fault_injection_fs.h"
#include "tests/support/status_matchers.h"

namespace tierzero::fs::testing {
namespace {

std::span<const std::byte> bytes_of(const std::string& text) { return std::as_bytes(std::span(text)); }

class CrashFs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = "fs_crash_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_OK(real_.remove_tree(root_));
    ASSERT_TRUE(real_.make_dir(root_).value());
    std::unique_ptr<WritableFile> old = real_.create(root_ + "/old", WriteOptions{}).value();
    ASSERT_OK(old->append(bytes_of("durable")));
  }
  void TearDown() override { EXPECT_OK(real_.remove_tree(root_)); }
  void write(FileSystem& fs, const std::string& name, const std::string& text, bool sync) {
    std::unique_ptr<WritableFile> f = fs.create(root_ + "/" + name, WriteOptions{}).value();
    ASSERT_OK(f->append(bytes_of(text)));
    if (sync) ASSERT_OK(f->sync());
    ASSERT_OK(f->close());
  }
  FileSystem& real_ = default_file_system();
  std::string root_;
};

TEST_F(CrashFs, WhatWasThereAtTheStartIsDurable) {
  FaultInjectionFs fs(real_, root_);
  ASSERT_OK(fs.restore_image(0));
  EXPECT_EQ(files_under(root_), (std::map<std::string, std::string>{{"old", "durable"}}));
}

TEST_F(CrashFs, UnsyncedBytesAndEntriesAreDropped) {
  FaultInjectionFs fs(real_, root_);
  write(fs, "synced_file_unsynced_entry", "a", true);
  write(fs, "old", "overwritten, never synced", false);
  ASSERT_OK(fs.restore_image(0));
  EXPECT_EQ(files_under(root_), (std::map<std::string, std::string>{{"old", "durable"}}));
}

TEST_F(CrashFs, ADirectorySyncKeepsEntriesAndSyncedBytesOnly) {
  FaultInjectionFs fs(real_, root_);
  write(fs, "synced", "kept", true);
  write(fs, "unsynced", "lost", false);
  ASSERT_OK(fs.sync_dir(root_));
  ASSERT_OK(fs.restore_image(0));
  EXPECT_EQ(files_under(root_),
            (std::map<std::string, std::string>{{"old", "durable"}, {"synced", "kept"}, {"unsynced", ""}}));
}

TEST_F(CrashFs, AnUnsyncedRenameIsDroppedOrKeptAsOneChange) {
  FaultInjectionFs fs(real_, root_);
  write(fs, "new.tmp", "new", true);
  ASSERT_OK(fs.sync_dir(root_));
  ASSERT_OK(fs.rename(root_ + "/new.tmp", root_ + "/old"));
  ASSERT_EQ(fs.image_count(), 2u);
  ASSERT_OK(fs.restore_image(0));
  EXPECT_EQ(files_under(root_), (std::map<std::string, std::string>{{"new.tmp", "new"}, {"old", "durable"}}));
  ASSERT_OK(fs.restore_image(1));
  EXPECT_EQ(files_under(root_), (std::map<std::string, std::string>{{"old", "new"}}));
}

TEST_F(CrashFs, ANewDirectorysContentNeedsItsOwnSyncAndItsParents) {
  FaultInjectionFs fs(real_, root_);
  ASSERT_TRUE(fs.make_dir(root_ + "/d").value());
  std::unique_ptr<WritableFile> f = fs.create(root_ + "/d/f", WriteOptions{}).value();
  ASSERT_OK(f->append(bytes_of("x")));
  ASSERT_OK(f->sync());
  ASSERT_OK(fs.sync_dir(root_ + "/d"));
  ASSERT_OK(fs.restore_image(0));
  EXPECT_EQ(files_under(root_).count("d/f"), 0u);  // d itself is not durable yet
  FaultInjectionFs again(real_, root_);
  ASSERT_TRUE(again.make_dir(root_ + "/d").value());
  ASSERT_OK(again.sync_dir(root_));
  ASSERT_OK(again.restore_image(0));
  EXPECT_EQ(real_.stat(root_ + "/d").value().is_dir, true);
  EXPECT_TRUE(files_under(root_ + "/d").empty());
}

TEST_F(CrashFs, StepsFailOnceInjectedAndAllCallsFailAfterACrash) {
  FaultInjectionFs fs(real_, root_);
  fs.fail_step(1);
  EXPECT_OK(fs.make_dir(root_ + "/a"));
  EXPECT_ERROR(fs.make_dir(root_ + "/b"), ErrorCode::kIo, "injected fault at step 1");
  EXPECT_OK(fs.make_dir(root_ + "/c"));
  fs.crash_at(4);
  EXPECT_OK(fs.sync_dir(root_));
  EXPECT_FALSE(fs.crashed());
  EXPECT_ERROR(fs.sync_dir(root_), ErrorCode::kIo, "simulated power loss at step 4");
  EXPECT_TRUE(fs.crashed());
  EXPECT_ERROR(fs.list_dir(root_), ErrorCode::kIo, "simulated power loss (before step 4)");
  ASSERT_EQ(fs.steps().size(), 5u);
  EXPECT_EQ(fs.steps()[1].op, "make_dir");
}

}  // namespace
}  // namespace tierzero::fs::testing
