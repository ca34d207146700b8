// offload/testing/host_copy_latency.h: a tier manager made inside a ScopedHostCopyLatency runs its
// host-memory GPU tier's copies that long after they are queued; made after the scope, at once.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "offload/testing/host_copy_latency.h"
#include "tests/offload/test_support.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using std::chrono::milliseconds;

// The time a fetch of a pinned-homed shard into the GPU tier (one copy) takes on `tm`.
milliseconds fetch_to_gpu_time(TierManager& tm) {
  EXPECT_OK(tm.register_shard({"w", 4096, ElementType::kU8, Tier::kPinned}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_OK(tm.fetch("w", Tier::kGpu).get());
  const auto elapsed = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  EXPECT_OK(tm.release("w").get());
  return elapsed;
}

std::unique_ptr<TierManager> host_tier_manager() {
  TierBudgets budgets = testing::small_budgets("", 1 << 20, 2 << 20, 0);
  budgets.device = DeviceChoice::kHost;
  Result<std::unique_ptr<TierManager>> tm = TierManager::create(budgets);
  EXPECT_OK(tm);
  return tm.ok() ? std::move(tm).value() : nullptr;
}

TEST(ScopedHostCopyLatency, CopiesWaitTheLatencyOnlyForManagersMadeInTheScope) {
  std::unique_ptr<TierManager> slow;
  {
    testing::ScopedHostCopyLatency latency(milliseconds(300));
    slow = host_tier_manager();
  }
  std::unique_ptr<TierManager> fast = host_tier_manager();
  ASSERT_TRUE(slow && fast);
  EXPECT_GE(fetch_to_gpu_time(*slow), milliseconds(300));
  EXPECT_LT(fetch_to_gpu_time(*fast), milliseconds(300));
}

}  // namespace
}  // namespace tierzero::offload
