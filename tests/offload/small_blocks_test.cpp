// Small shards: packed in the pinned and GPU pools with small alignments, so a mix of small and
// large shards costs at most 5% over the bytes asked; their NVMe I/O, unaligned for O_DIRECT,
// goes through the IoEngine's bounce buffers and stays byte-exact.
#include <gtest/gtest.h>

#include <random>

#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using testing::first_difference;
using testing::pattern;
using testing::read_view;
using testing::write_view;

TEST(SmallShards, MixStaysWithinFivePercentAndRoundTripsThroughNvme) {
  test_support::ScratchDir dir;
  auto io = testing::make_io();
  ASSERT_TRUE(io);
  const uint64_t staging = 4 * 3 * (64 << 10);
  auto m = TierManager::create(testing::small_budgets(dir.path(), 2 << 20, staging + (2 << 20), 8 << 20), io.get());
  ASSERT_OK(m);
  TierManager& tm = **m;

  std::mt19937_64 rng(5);
  std::vector<std::pair<std::string, uint64_t>> shards;
  for (int i = 0; i < 80; ++i) {
    const uint64_t bytes = i % 10 == 0 ? (90 << 10) + rng() % (100 << 10) : 1 + rng() % 6000;
    shards.emplace_back("s" + std::to_string(i), bytes);
  }
  uint64_t asked = 0;
  for (const auto& [id, bytes] : shards) {
    ASSERT_OK(tm.register_shard({id, bytes, ElementType::kU8, Tier::kNvme})) << id;
    Result<ShardView> v = tm.fetch(id, Tier::kPinned, Access::kWrite).get();
    ASSERT_OK(v);
    const std::vector<uint8_t> data = pattern(bytes, bytes);
    write_view(*v, 0, data.data(), bytes);
    asked += bytes;
  }
  const TierUsage pinned = tm.usage(Tier::kPinned);
  EXPECT_GE(pinned.used_bytes, asked);
  EXPECT_LE(static_cast<double>(pinned.used_bytes), 1.05 * static_cast<double>(asked));

  for (const auto& [id, bytes] : shards) {
    ASSERT_OK(tm.release(id).get()) << id;  // writes back to NVMe
    ASSERT_OK(tm.evict(id, Tier::kPinned).get()) << id;
  }
  for (Tier tier : {Tier::kGpu, Tier::kPinned}) {
    for (const auto& [id, bytes] : shards) {
      Result<ShardView> v = tm.fetch(id, tier).get();
      ASSERT_OK(v);
      EXPECT_EQ(first_difference(pattern(bytes, bytes), read_view(*v)), "") << id << " in " << tier_name(tier);
      ASSERT_OK(tm.release(id).get());
      ASSERT_OK(tm.evict(id, tier).get());
    }
  }
}

}  // namespace
}  // namespace tierzero::offload
