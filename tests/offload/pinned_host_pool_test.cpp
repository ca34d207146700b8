// PinnedHostPool (offload/offload.h): exact-size blocks and the capacity checks at creation (their
// errors naming MemAvailable and RLIMIT_MEMLOCK). Host-backed arenas (DeviceChoice::kHost), so the
// suite runs without a GPU; and the parallel first touch the CUDA arenas get before cudaHostRegister.
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "offload/internal/device_memory.h"
#include "offload/internal/host_facts.h"
#include "offload/offload.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

std::unique_ptr<PinnedHostPool> host_pool(uint64_t capacity) {
  Result<std::unique_ptr<PinnedHostPool>> pool =
      PinnedHostPool::create({.capacity_bytes = capacity, .device = DeviceChoice::kHost, .lock_host_memory = false});
  EXPECT_OK(pool);
  return pool.ok() ? std::move(pool).value() : nullptr;
}

TEST(PinnedHostPool, BlocksTakeExactlyTheirFootprint) {
  // A budget summed from footprint() holds exactly those blocks, with nothing to spare.
  const std::vector<uint64_t> sizes = {1, 100, 4096, 80 << 10, (1 << 20) + 3, 7 << 20};
  uint64_t capacity = 0;
  for (uint64_t bytes : sizes) capacity += PinnedHostPool::footprint(bytes);
  std::unique_ptr<PinnedHostPool> pool = host_pool(capacity);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->capacity(), capacity);
  EXPECT_FALSE(pool->gpu_pinned());
  uint64_t used = 0;
  for (uint64_t bytes : sizes) {
    Result<void*> block = pool->allocate(bytes);
    ASSERT_OK(block) << bytes;
    std::memset(block.value(), 0xab, bytes);  // the whole block is writable
    used += PinnedHostPool::footprint(bytes);
    EXPECT_EQ(pool->used(), used);
  }
  EXPECT_EQ(pool->used(), capacity);
  EXPECT_ERROR(pool->allocate(1), ErrorCode::kOutOfSpace, "no room");
}

TEST(PinnedHostPool, FootprintRoundsToTheBlockAlignment) {
  EXPECT_EQ(PinnedHostPool::footprint(1) % 16, 0u);
  EXPECT_GE(PinnedHostPool::footprint(1), 1u);
  EXPECT_EQ(PinnedHostPool::footprint(1 << 20), 1u << 20);
  EXPECT_EQ(PinnedHostPool::footprint((1 << 20) + 1), (1u << 20) + 4096);
}

TEST(PinnedHostPool, ZeroBytesIsRefused) {
  std::unique_ptr<PinnedHostPool> pool = host_pool(4096);
  ASSERT_NE(pool, nullptr);
  EXPECT_ERROR(pool->allocate(0), ErrorCode::kInvalidArgument, "a block of 0 bytes");
}

TEST(PinnedHostPool, EmptyPoolHasNoRoom) {
  std::unique_ptr<PinnedHostPool> pool = host_pool(0);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->capacity(), 0u);
  EXPECT_ERROR(pool->allocate(16), ErrorCode::kOutOfSpace, "no room");
}

TEST(PinnedHostPool, CapacityAboveMemAvailableIsRefusedBeforeAllocating) {
  const HostFacts facts = read_host_facts().value();
  EXPECT_ERROR(
      PinnedHostPool::create({.capacity_bytes = facts.mem_available + (1ull << 30), .device = DeviceChoice::kHost}),
      ErrorCode::kOutOfSpace, "MemAvailable");
}

// Lowers the soft RLIMIT_MEMLOCK for the test's duration.
class MemlockLimit {
 public:
  explicit MemlockLimit(rlim_t soft) {
    getrlimit(RLIMIT_MEMLOCK, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    lowered_ = setrlimit(RLIMIT_MEMLOCK, &lowered) == 0;
  }
  ~MemlockLimit() { setrlimit(RLIMIT_MEMLOCK, &saved_); }
  bool lowered() const { return lowered_; }

 private:
  rlimit saved_{};
  bool lowered_ = false;
};

TEST(PinnedHostPool, LockedCapacityAboveMemlockLimitIsRefused) {
  MemlockLimit limit(64 << 10);
  ASSERT_TRUE(limit.lowered()) << "setrlimit(RLIMIT_MEMLOCK): " << std::strerror(errno);
  if (read_host_facts().value().can_lock_unlimited) GTEST_SKIP() << "CAP_IPC_LOCK: RLIMIT_MEMLOCK does not apply";
  EXPECT_ERROR(
      PinnedHostPool::create({.capacity_bytes = 1 << 20, .device = DeviceChoice::kHost, .lock_host_memory = true}),
      ErrorCode::kResourceExhausted, "RLIMIT_MEMLOCK");
  // Not locking, the same capacity is fine.
  EXPECT_NE(host_pool(1 << 20), nullptr);
}

TEST(TouchInParallel, ZeroesExactlyTheRangeOnSeveralThreads) {
  // Two 256 MiB slices and a ragged rest (threads split at 2 MiB), between guard bytes.
  const uint64_t bytes = (514ull << 20) + 12345, guard = 4096;
  std::vector<unsigned char> memory(bytes + 2 * guard, 0xab);
  touch_in_parallel(memory.data() + guard, bytes);
  EXPECT_TRUE(std::all_of(memory.begin() + guard, memory.end() - guard, [](unsigned char b) { return b == 0; }));
  EXPECT_TRUE(std::all_of(memory.begin(), memory.begin() + guard, [](unsigned char b) { return b == 0xab; }));
  EXPECT_TRUE(std::all_of(memory.end() - guard, memory.end(), [](unsigned char b) { return b == 0xab; }));
}

}  // namespace
}  // namespace tierzero::offload
