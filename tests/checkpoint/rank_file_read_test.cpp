// RankFileHandle::read_at: large reads split over cores come back byte-exact, hashed in order
// (against XXH3 of the same bytes in one call), and a read past the end names the truncation.
#include "checkpoint/engine_format/internal/section_cursor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::ScratchDir;

class RankFileRead : public ::testing::Test {
 protected:
  void SetUp() override {
    bytes_.resize((21u << 20) + 4093);  // more than 8 MiB (split over cores), not whole pieces
    std::mt19937_64 rng(7);
    for (auto& b : bytes_) b = static_cast<uint8_t>(rng());
    path_ = dir_.file("rank_00000.bin");
    testing::write_file(path_, bytes_);
  }

  ScratchDir dir_;
  std::string path_;
  std::vector<uint8_t> bytes_;
};

TEST_F(RankFileRead, LargeReadIsExactAndHashedInOrder) {
  auto file = RankFileHandle::open(path_, 0, 1, bytes_.size());
  ASSERT_OK(file);
  for (const auto& [offset, length] :
       {std::pair<size_t, size_t>{0, bytes_.size()}, {3, (17u << 20) + 5}, {4096, 100}, {1u << 20, 8u << 20}}) {
    std::vector<std::byte> out(length);
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    const Status s = (*file)->read_at(offset, out, state);
    const uint64_t got = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    ASSERT_OK(s);
    EXPECT_EQ(std::memcmp(out.data(), bytes_.data() + offset, length), 0) << "offset " << offset;
    EXPECT_EQ(got, XXH3_64bits(bytes_.data() + offset, length)) << "offset " << offset;
  }
}

TEST_F(RankFileRead, ReadPastTheEndSaysTruncated) {
  auto file = RankFileHandle::open(path_, 0, 1, bytes_.size());
  ASSERT_OK(file);
  std::vector<std::byte> out(12u << 20);
  const Status s = (*file)->read_at(bytes_.size() - (4u << 20), out);
  ASSERT_EQ(s.code(), ErrorCode::kCorrupt) << s.to_string();
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(path_), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(std::to_string(bytes_.size())), std::string::npos) << s.message();  // where it ends
}

}  // namespace
}  // namespace tierzero::checkpoint
