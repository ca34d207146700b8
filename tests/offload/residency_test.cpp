// The residency state machine: registration, holds, write-back, versions and the rules that
// keep them consistent, in every tier.
#include <gtest/gtest.h>

#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using testing::pattern;
using testing::read_view;
using testing::write_view;

constexpr Tier kTiers[] = {Tier::kGpu, Tier::kPinned, Tier::kNvme};

class Residency : public ::testing::Test {
 protected:
  void SetUp() override {
    io_ = testing::make_io();
    ASSERT_TRUE(io_);
    auto m = TierManager::create(testing::small_budgets(dir_.path(), 1 << 20, 2 << 20, 4 << 20), io_.get());
    ASSERT_OK(m);
    tm_ = std::move(m).value();
  }

  ShardView fetch_ok(const std::string& id, Tier tier, Access access = Access::kRead) {
    Result<ShardView> v = tm_->fetch(id, tier, access).get();
    EXPECT_OK(v);
    return v.ok() ? *v : ShardView{};
  }

  test_support::ScratchDir dir_;
  std::unique_ptr<nvme::IoEngine> io_;
  std::unique_ptr<TierManager> tm_;
};

TEST_F(Residency, BudgetStatementNamesEveryTier) {
  const std::string s = tm_->budget_statement();
  EXPECT_NE(s.find("gpu: budget 1.00 MiB"), std::string::npos) << s;
  EXPECT_NE(s.find("pinned: budget 2.00 MiB"), std::string::npos) << s;
  EXPECT_NE(s.find("RLIMIT_MEMLOCK"), std::string::npos) << s;
  EXPECT_NE(s.find("nvme: 4.00 MiB"), std::string::npos) << s;
}

TEST_F(Residency, NewShardsReadAsZerosFromEveryHome) {
  for (Tier home : kTiers) {
    const std::string id = std::string("zero/") + tier_name(home);
    ASSERT_OK(tm_->register_shard({id, 70001, ElementType::kU8, home}));
    EXPECT_EQ(testing::pinned_contents(*tm_, id), std::vector<uint8_t>(70001, 0)) << id;
  }
}

TEST_F(Residency, WritebackReachesHomeFromEveryTierAndBumpsTheVersion) {
  int n = 0;
  for (Tier home : kTiers) {
    for (Tier at : {Tier::kGpu, Tier::kPinned}) {
      const std::string id = std::string("w/") + tier_name(home) + "/" + tier_name(at);
      const uint64_t bytes = 100000 + 4097 * n;
      ASSERT_OK(tm_->register_shard({id, bytes, ElementType::kBF16, home}));
      ShardView v = fetch_ok(id, at, Access::kWrite);
      const std::vector<uint8_t> data = pattern(++n, bytes);
      write_view(v, 0, data.data(), bytes);
      ASSERT_OK(tm_->writeback(id).get());
      Result<ShardInfo> info = tm_->info(id);
      ASSERT_OK(info);
      EXPECT_EQ(info->version, 1u);
      EXPECT_TRUE(info->valid[static_cast<int>(home)]);
      EXPECT_TRUE(info->write_hold);
      ASSERT_OK(tm_->release(id).get());
      EXPECT_EQ(tm_->info(id)->version, 1u);  // released after a writeback: not written twice
      EXPECT_EQ(testing::pinned_contents(*tm_, id), data) << id;
    }
  }
}

TEST_F(Residency, ReleaseWritesBackAWriteHoldThatWasNotWrittenBack) {
  ASSERT_OK(tm_->register_shard({"r", 50000, ElementType::kF32, Tier::kNvme}));
  ShardView v = fetch_ok("r", Tier::kGpu, Access::kWrite);
  const std::vector<uint8_t> data = pattern(3, 50000);
  write_view(v, 0, data.data(), data.size());
  ASSERT_OK(tm_->release("r").get());
  Result<ShardInfo> info = tm_->info("r");
  EXPECT_EQ(info->version, 1u);
  EXPECT_TRUE(info->valid[static_cast<int>(Tier::kNvme)]);
  EXPECT_FALSE(info->has_current_tier);
  EXPECT_EQ(testing::pinned_contents(*tm_, "r"), data);
}

TEST_F(Residency, AWriteHoldInvalidatesOtherCachedCopies) {
  ASSERT_OK(tm_->register_shard({"c", 40000, ElementType::kU8, Tier::kNvme}));
  fetch_ok("c", Tier::kGpu);
  ASSERT_OK(tm_->release("c").get());
  EXPECT_TRUE(tm_->info("c")->valid[static_cast<int>(Tier::kGpu)]);
  ShardView v = fetch_ok("c", Tier::kPinned, Access::kWrite);
  EXPECT_FALSE(tm_->info("c")->valid[static_cast<int>(Tier::kGpu)]);
  const std::vector<uint8_t> data = pattern(4, 40000);
  write_view(v, 0, data.data(), data.size());
  ASSERT_OK(tm_->release("c").get());
  ShardView g = fetch_ok("c", Tier::kGpu);
  EXPECT_EQ(read_view(g), data);
  ASSERT_OK(tm_->release("c").get());
}

TEST_F(Residency, HoldRulesAreEnforced) {
  ASSERT_OK(tm_->register_shard({"h", 30000, ElementType::kU8, Tier::kPinned}));
  fetch_ok("h", Tier::kGpu);
  fetch_ok("h", Tier::kGpu);  // read holds stack
  EXPECT_EQ(tm_->info("h")->holds, 2u);
  EXPECT_EQ(tm_->fetch("h", Tier::kPinned).get().status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tm_->fetch("h", Tier::kGpu, Access::kWrite).get().status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tm_->unregister_shard("h").code(), ErrorCode::kInvalidArgument);
  ASSERT_OK(tm_->release("h").get());
  ASSERT_OK(tm_->release("h").get());
  EXPECT_EQ(tm_->release("h").get().code(), ErrorCode::kInvalidArgument);
  fetch_ok("h", Tier::kPinned, Access::kWrite);
  EXPECT_EQ(tm_->fetch("h", Tier::kPinned).get().status().code(), ErrorCode::kInvalidArgument);
  ASSERT_OK(tm_->release("h").get());
  EXPECT_OK(tm_->unregister_shard("h"));
  EXPECT_EQ(tm_->info("h").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(tm_->fetch("h", Tier::kGpu).get().status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(tm_->register_shard({"z", 0, ElementType::kU8, Tier::kPinned}).code(), ErrorCode::kInvalidArgument);
  ASSERT_OK(tm_->register_shard({"d", 10, ElementType::kU8, Tier::kPinned}));
  EXPECT_EQ(tm_->register_shard({"d", 10, ElementType::kU8, Tier::kPinned}).code(), ErrorCode::kInvalidArgument);
}

TEST_F(Residency, UnregisterFreesEveryCopy) {
  const TierUsage before = tm_->usage(Tier::kNvme);
  ASSERT_OK(tm_->register_shard({"u", 300000, ElementType::kU8, Tier::kNvme}));
  fetch_ok("u", Tier::kGpu);
  ASSERT_OK(tm_->release("u").get());
  EXPECT_GT(tm_->usage(Tier::kGpu).used_bytes, 0u);
  ASSERT_OK(tm_->unregister_shard("u"));
  EXPECT_EQ(tm_->usage(Tier::kGpu).used_bytes, 0u);
  EXPECT_EQ(tm_->usage(Tier::kNvme).used_bytes, before.used_bytes);
}

TEST_F(Residency, EvictDropsCachedCopiesOnly) {
  ASSERT_OK(tm_->register_shard({"e", 60000, ElementType::kU8, Tier::kNvme}));
  fetch_ok("e", Tier::kGpu);
  EXPECT_EQ(tm_->evict("e", Tier::kGpu).get().code(), ErrorCode::kInvalidArgument);  // held
  ASSERT_OK(tm_->release("e").get());
  EXPECT_EQ(tm_->evict("e", Tier::kNvme).get().code(), ErrorCode::kInvalidArgument);  // home
  ASSERT_OK(tm_->evict("e", Tier::kGpu).get());
  EXPECT_FALSE(tm_->info("e")->valid[static_cast<int>(Tier::kGpu)]);
  EXPECT_EQ(tm_->usage(Tier::kGpu).used_bytes, 0u);
  EXPECT_OK(tm_->evict("e", Tier::kPinned).get());  // no copy: nothing to do
}

TEST(ResidencyWithoutGpuTier, FetchToATierWithoutBudgetIsRefused) {
  test_support::ScratchDir dir;
  auto m = TierManager::create(testing::small_budgets(dir.path(), 0, 1 << 20, 0));
  ASSERT_OK(m);
  ASSERT_OK((*m)->register_shard({"p", 1000, ElementType::kU8, Tier::kPinned}));
  Status s = (*m)->fetch("p", Tier::kGpu).get().status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("gpu_bytes"), std::string::npos) << s.message();
  EXPECT_EQ((*m)->register_shard({"n", 1000, ElementType::kU8, Tier::kNvme}).code(), ErrorCode::kOutOfSpace);
}

}  // namespace
}  // namespace tierzero::offload
