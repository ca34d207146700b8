// Budgets: impossible ones fail at start with numbers; full tiers evict cached copies (LRU, or
// farthest next use once a trace is recorded) and report what holds them when nothing can go.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

constexpr uint64_t kShard = 256 << 10;  // four fit the 1 MiB GPU tier exactly

bool gpu_valid(TierManager& tm, const std::string& id) { return tm.info(id)->valid[static_cast<int>(Tier::kGpu)]; }

std::string name(int i) { return "s" + std::to_string(i); }

std::unique_ptr<TierManager> make(const TierBudgets& b) {
  auto m = TierManager::create(b);
  EXPECT_OK(m);
  return m.ok() ? std::move(m).value() : nullptr;
}

void touch(TierManager& tm, const std::string& id, Tier tier = Tier::kGpu) {
  ASSERT_OK(tm.fetch(id, tier).get()) << id;
  ASSERT_OK(tm.release(id).get()) << id;
}

TEST(Budgets, NvmeLargerThanTheDiskFailsAtStartWithNumbers) {
  test_support::ScratchDir dir;
  auto m = TierManager::create(testing::small_budgets(dir.path(), 0, 1 << 20, uint64_t{1} << 50));
  EXPECT_ERROR(m, ErrorCode::kOutOfSpace, "needs 1.00 PiB");
  EXPECT_ERROR(m, ErrorCode::kOutOfSpace, "free (statvfs)");
}

TEST(Budgets, PinnedLargerThanHostMemoryFailsAtStartWithNumbers) {
  EXPECT_ERROR(TierManager::create(testing::small_budgets("", 0, uint64_t{1} << 50, 0)), ErrorCode::kOutOfSpace,
               "MemAvailable");
}

TEST(Budgets, StagingMustFitThePinnedBudget) {
  test_support::ScratchDir dir;
  EXPECT_ERROR(TierManager::create(testing::small_budgets(dir.path(), 0, 256 << 10, 1 << 20)), ErrorCode::kOutOfSpace,
               "staging buffers");
}

TEST(Budgets, BadKnobsAreRefusedByName) {
  TierBudgets b = testing::small_budgets("", 0, 1 << 20, 0);
  b.pipeline_depth = 1;
  EXPECT_ERROR(TierManager::create(b), ErrorCode::kInvalidArgument, "pipeline_depth");
}

TEST(Budgets, LeastRecentlyUsedCopyIsEvictedWithoutATrace) {
  auto tm = make(testing::small_budgets("", 1 << 20, 2 << 20, 0));
  for (int i = 0; i < 6; ++i) ASSERT_OK(tm->register_shard({name(i), kShard, ElementType::kU8, Tier::kPinned}));
  for (int i = 0; i < 4; ++i) touch(*tm, name(i));
  touch(*tm, "s0");  // s1 is now the least recently used
  touch(*tm, "s4");
  EXPECT_TRUE(gpu_valid(*tm, "s0"));
  EXPECT_FALSE(gpu_valid(*tm, "s1"));
  EXPECT_TRUE(gpu_valid(*tm, "s4"));
  EXPECT_EQ(tm->usage(Tier::kGpu).used_bytes, 4 * kShard);
}

TEST(Budgets, FarthestNextUseIsEvictedOnceATraceIsRecorded) {
  TierBudgets b = testing::small_budgets("", 1 << 20, 2 << 20, 0);
  b.prefetch_bytes = 0;  // eviction alone
  auto tm = make(b);
  for (int i = 0; i < 6; ++i) ASSERT_OK(tm->register_shard({name(i), kShard, ElementType::kU8, Tier::kPinned}));
  tm->begin_trace();
  for (int i = 0; i < 6; ++i) touch(*tm, name(i));
  tm->end_trace();
  // GPU holds s2..s5. Fetching s0 must evict s5 (used last), where LRU would evict s2.
  touch(*tm, "s0");
  EXPECT_TRUE(gpu_valid(*tm, "s2"));
  EXPECT_FALSE(gpu_valid(*tm, "s5"));
}

TEST(Budgets, HeldCopiesThatFillATierAreReportedWithNumbers) {
  auto tm = make(testing::small_budgets("", 1 << 20, 2 << 20, 0));
  for (int i = 0; i < 5; ++i) ASSERT_OK(tm->register_shard({name(i), kShard, ElementType::kU8, Tier::kPinned}));
  for (int i = 0; i < 4; ++i) ASSERT_OK(tm->fetch(name(i), Tier::kGpu).get());
  Status s = tm->fetch("s4", Tier::kGpu).get().status();
  EXPECT_EQ(s.code(), ErrorCode::kOutOfSpace);
  EXPECT_NE(s.message().find("1.00 MiB of fetched (held) copies"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("gpu_bytes"), std::string::npos) << s.message();
  EXPECT_FALSE(tm->info("s4")->has_current_tier);
  ASSERT_OK(tm->release("s0").get());
  EXPECT_OK(tm->fetch("s4", Tier::kGpu).get());  // s0's copy is evictable now
}

TEST(Budgets, HomeStorageBeyondTheBudgetIsRefused) {
  auto tm = make(testing::small_budgets("", 1 << 20, 2 << 20, 0));
  for (int i = 0; i < 4; ++i) ASSERT_OK(tm->register_shard({name(i), kShard, ElementType::kU8, Tier::kGpu}));
  Status s = tm->register_shard({"s4", kShard, ElementType::kU8, Tier::kGpu});
  EXPECT_EQ(s.code(), ErrorCode::kOutOfSpace);
  EXPECT_NE(s.message().find("1.00 MiB of home copies"), std::string::npos) << s.message();
}

TEST(Prefetch, ExplicitPrefetchLoadsWithoutHolding) {
  auto tm = make(testing::small_budgets("", 1 << 20, 2 << 20, 0));
  for (int i = 0; i < 3; ++i) ASSERT_OK(tm->register_shard({name(i), kShard, ElementType::kU8, Tier::kPinned}));
  ASSERT_OK(tm->prefetch({"s0", "s1", "s2"}, Tier::kGpu).get());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(gpu_valid(*tm, name(i)));
    EXPECT_FALSE(tm->info(name(i))->has_current_tier);
  }
}

TEST(Prefetch, TraceReplayLoadsTheNextShardsAhead) {
  TierBudgets b = testing::small_budgets("", 1 << 20, 2 << 20, 0);
  b.prefetch_bytes = 2 * kShard;
  auto tm = make(b);
  for (int i = 0; i < 8; ++i) ASSERT_OK(tm->register_shard({name(i), kShard, ElementType::kU8, Tier::kPinned}));
  tm->begin_trace();
  for (int i = 0; i < 8; ++i) touch(*tm, name(i));
  tm->end_trace();
  touch(*tm, "s0");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(gpu_valid(*tm, "s1") && gpu_valid(*tm, "s2")) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(gpu_valid(*tm, "s1"));
  EXPECT_TRUE(gpu_valid(*tm, "s2"));
}

}  // namespace
}  // namespace tierzero::offload
