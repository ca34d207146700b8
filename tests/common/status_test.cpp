#include "common/common.h"
#include "tests/support/status_matchers.h"

#include <cerrno>

#include <gtest/gtest.h>

namespace tierzero {
namespace {

Result<int> half(int x) {
  if (x % 2) return invalid_argument("odd: " + std::to_string(x));
  return x / 2;
}

Status quarter(int x, int* out) {
  TZ_ASSIGN_OR_RETURN(int h, half(x));
  TZ_ASSIGN_OR_RETURN(*out, half(h));
  return {};
}

TEST(Status, ContextIsPrependedAndOkStaysOk) {
  Status s = io_error("short read").with_context("while reading shard 3");
  EXPECT_EQ(s.message(), "while reading shard 3: short read");
  EXPECT_OK(Status().with_context("x"));
}

TEST(Status, ErrnoMapsToCodeAndText) {
  EXPECT_EQ(errno_status(ENOSPC, "write /x").code(), ErrorCode::kOutOfSpace);
  EXPECT_EQ(errno_status(ENOENT, "open /x").code(), ErrorCode::kNotFound);
  EXPECT_NE(errno_status(EIO, "read /x at 4096").message().find("(errno 5)"), std::string::npos);
}

TEST(Result, PropagatesThroughMacros) {
  int out = 0;
  EXPECT_OK(quarter(8, &out));
  EXPECT_EQ(out, 2);
  Status s = quarter(6, &out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd: 3");
  EXPECT_THROW(half(3).value(), Error);
}

}  // namespace
}  // namespace tierzero
