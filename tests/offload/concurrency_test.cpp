// Many threads at once: each owns shards it writes and checks, all share read-only shards, and
// a recorded trace keeps prefetches running in the background. Run under ThreadSanitizer
// (preset tsan) to check the locking.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using testing::pattern;
using testing::read_view;
using testing::write_view;

constexpr int kThreads = 6;
constexpr int kOwnedPerThread = 3;
constexpr uint64_t kBytes = 90000;

TEST(Concurrency, ThreadsWritingOwnShardsAndReadingSharedOnesStayConsistent) {
  test_support::ScratchDir dir;
  auto io = testing::make_io();
  ASSERT_TRUE(io);
  TierBudgets budgets = testing::small_budgets(dir.path(), 1 << 20, (768 << 10) + (1 << 20), 16 << 20);
  auto m = TierManager::create(budgets, io.get());
  ASSERT_OK(m);
  TierManager& tm = **m;
  const Tier homes[] = {Tier::kNvme, Tier::kPinned, Tier::kGpu};
  for (int s = 0; s < 4; ++s) {
    const std::string id = "shared" + std::to_string(s);
    ASSERT_OK(tm.register_shard({id, kBytes, ElementType::kU8, Tier::kNvme}));
    Result<ShardView> v = tm.fetch(id, Tier::kPinned, Access::kWrite).get();
    ASSERT_OK(v);
    const std::vector<uint8_t> data = pattern(1000 + s, kBytes);
    write_view(*v, 0, data.data(), kBytes);
    ASSERT_OK(tm.release(id).get());
  }
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kOwnedPerThread; ++k) {
      const std::string id = "t" + std::to_string(t) + "/" + std::to_string(k);
      ASSERT_OK(tm.register_shard({id, kBytes - 97 * t, ElementType::kU8, homes[k % 3]}));
    }
  }
  tm.begin_trace();
  for (int s = 0; s < 4; ++s) {
    ASSERT_OK(tm.fetch("shared" + std::to_string(s), Tier::kPinned).get());
    ASSERT_OK(tm.release("shared" + std::to_string(s)).get());
  }
  tm.end_trace();

  std::atomic<int> failures{0};
  auto worker = [&](int t) {
    std::mt19937_64 rng(t);
    std::vector<std::vector<uint8_t>> expect(kOwnedPerThread);
    for (int k = 0; k < kOwnedPerThread; ++k) expect[k].assign(kBytes - 97 * t, 0);
    for (int round = 0; round < 120; ++round) {
      const int k = rng() % kOwnedPerThread;
      const std::string id = "t" + std::to_string(t) + "/" + std::to_string(k);
      const Tier tier = rng() % 2 ? Tier::kGpu : Tier::kPinned;
      Result<ShardView> v = tm.fetch(id, tier, Access::kWrite).get();
      if (!v.ok()) {  // a tier full of other threads' holds
        if (v.status().code() != ErrorCode::kOutOfSpace) ++failures;
        continue;
      }
      if (read_view(*v) != expect[k]) ++failures;
      expect[k] = pattern(t * 100000 + round, expect[k].size());
      write_view(*v, 0, expect[k].data(), expect[k].size());
      if (!tm.release(id).get().ok()) ++failures;

      const std::string shared = "shared" + std::to_string(rng() % 4);
      Result<ShardView> r = tm.fetch(shared, Tier::kPinned).get();
      if (r.ok()) {
        if (read_view(*r) != pattern(1000 + (shared.back() - '0'), kBytes)) ++failures;
        if (!tm.release(shared).get().ok()) ++failures;
      } else if (r.status().code() != ErrorCode::kOutOfSpace) {
        ++failures;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace tierzero::offload
