#include "common/common.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace tierzero {
namespace {

TEST(ParseBytes, AcceptsPlainScientificDecimalAndBinary) {
  EXPECT_EQ(parse_bytes("4096").value(), 4096u);
  EXPECT_EQ(parse_bytes("5e8").value(), 500000000u);
  EXPECT_EQ(parse_bytes("5GB").value(), 5000000000u);
  EXPECT_EQ(parse_bytes("1MiB").value(), 1048576u);
  EXPECT_EQ(parse_bytes("2kib").value(), 2048u);
  EXPECT_EQ(parse_bytes("1.5KiB").value(), 1536u);
}

TEST(ParseBytes, RejectsWithTheTextAndAnExample) {
  for (const char* bad : {"", "abc", "-1", "1.5", "3XB", "1e30"}) {
    EXPECT_ERROR(parse_bytes(bad), ErrorCode::kInvalidArgument, std::string("'") + bad + "'");
  }
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
}

}  // namespace
}  // namespace tierzero
