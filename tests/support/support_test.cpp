// The support library itself: the status checks print the error, and ScratchDir cleans up.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero {
namespace {

Result<int> seven() { return 7; }
Result<int> missing() { return not_found("no such shard 'w'"); }

TEST(StatusMatchers, PassOnOk) {
  EXPECT_OK(Status());
  ASSERT_OK(seven());
  ASSERT_OK_AND_ASSIGN(const int v, seven());
  EXPECT_EQ(v, 7);
  EXPECT_ERROR(missing(), ErrorCode::kNotFound, "shard 'w'");
}

TEST(StatusMatchers, FailuresNameTheExpressionAndTheError) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(missing()), "missing() is not OK: ");
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(missing()), "no such shard 'w'");
  EXPECT_FATAL_FAILURE(ASSERT_OK(io_error("disk gone")), "disk gone");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(seven(), ErrorCode::kCorrupt, "x"), "seven() is OK; expected");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(missing(), ErrorCode::kCorrupt, "shard"), "expected corrupt");
  EXPECT_NONFATAL_FAILURE(EXPECT_ERROR(missing(), ErrorCode::kNotFound, "tensor"), "with \"tensor\"");
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

TEST(ScratchDir, IsFreshAndRemovedWithItsContents) {
  std::string path;
  {
    test_support::ScratchDir a("support-test"), b("support-test");
    ASSERT_NE(a.path(), b.path());
    path = a.path();
    EXPECT_EQ(a.file("x/y"), path + "/x/y");
    ASSERT_EQ(::mkdir(a.file("sub").c_str(), 0700), 0);
    std::ofstream(a.file("sub/f")) << "bytes";
    EXPECT_TRUE(exists(a.file("sub/f")));
  }
  EXPECT_FALSE(exists(path));
  EXPECT_TRUE(test_support::remove_tree(path)) << "a missing path is fine";
}

TEST(ScratchDir, UnwritableRootThrowsNamingThePath) {
  EXPECT_THROW(test_support::ScratchDir("x", "/nonexistent-tierzero-root"), std::runtime_error);
}

}  // namespace
}  // namespace tierzero
