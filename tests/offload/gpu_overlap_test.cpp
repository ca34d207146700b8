// On a GPU: transfers run while a kernel runs. A 1.5 s kernel is queued on a compute stream;
// fetches to the GPU (pinned -> GPU and the NVMe -> GPU pipeline) and a writeback (GPU -> NVMe)
// complete while the kernel's end event is still pending, so nothing waited on the whole device.
// Skips where cudaGetDeviceCount finds no GPU.
#include <gtest/gtest.h>

#include "tests/offload/spin_kernel.h"
#include "tests/offload/test_support.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

using testing::pattern;
using testing::read_view;
using testing::write_view;

constexpr uint64_t kBytes = 64ull << 20;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

class GpuOverlap : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU (cudaGetDeviceCount returned 0 or an error)";
    io_ = testing::make_io();
    TierBudgets b = testing::small_budgets(dir_.path(), 512ull << 20, 640ull << 20, 512ull << 20);
    b.chunk_bytes = 8 << 20;
    b.stripe_bytes = 1 << 20;
    b.pinned_arena_bytes = 128 << 20;
    auto m = TierManager::create(b, io_.get());
    ASSERT_OK(m);
    tm_ = std::move(m).value();
    ASSERT_TRUE(tm_->gpu_is_device());
    ASSERT_EQ(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaEventCreate(&kernel_done_), cudaSuccess);
  }
  void TearDown() override {
    if (kernel_done_) cudaEventDestroy(kernel_done_);
    if (compute_) cudaStreamDestroy(compute_);
  }

  void put(const std::string& id, Tier home, uint64_t seed) {
    ASSERT_OK(tm_->register_shard({id, kBytes, ElementType::kBF16, home}));
    Result<ShardView> v = tm_->fetch(id, Tier::kPinned, Access::kWrite).get();
    ASSERT_OK(v);
    const std::vector<uint8_t> data = pattern(seed, kBytes);
    write_view(*v, 0, data.data(), kBytes);
    ASSERT_OK(tm_->release(id).get());
    if (home != Tier::kPinned) ASSERT_OK(tm_->evict(id, Tier::kPinned).get());
  }

  void start_kernel() {
    ASSERT_EQ(testing::launch_spin(compute_, 1500), cudaSuccess);
    ASSERT_EQ(cudaEventRecord(kernel_done_, compute_), cudaSuccess);
  }
  bool kernel_running() { return cudaEventQuery(kernel_done_) == cudaErrorNotReady; }

  test_support::ScratchDir dir_;
  std::unique_ptr<nvme::IoEngine> io_;
  std::unique_ptr<TierManager> tm_;
  cudaStream_t compute_ = nullptr;
  cudaEvent_t kernel_done_ = nullptr;
};

TEST_F(GpuOverlap, PinnedToGpuFetchCompletesWhileAKernelRuns) {
  put("p", Tier::kPinned, 1);
  start_kernel();
  Result<ShardView> v = tm_->fetch("p", Tier::kGpu).get();
  ASSERT_OK(v);
  EXPECT_TRUE(kernel_running()) << "the H2D copy waited for the kernel: a device-wide sync somewhere";
  ASSERT_EQ(cudaEventSynchronize(kernel_done_), cudaSuccess);
  EXPECT_TRUE(read_view(*v) == pattern(1, kBytes));
  ASSERT_OK(tm_->release("p").get());
}

TEST_F(GpuOverlap, NvmePipelineBothWaysRunsWhileAKernelRuns) {
  put("n", Tier::kNvme, 2);
  start_kernel();
  Result<ShardView> v = tm_->fetch("n", Tier::kGpu, Access::kWrite).get();  // NVMe -> pinned -> GPU
  ASSERT_OK(v);
  EXPECT_TRUE(kernel_running()) << "the NVMe -> GPU pipeline waited for the kernel";
  ASSERT_OK(tm_->writeback("n").get());  // GPU -> pinned -> NVMe
  EXPECT_TRUE(kernel_running()) << "the GPU -> NVMe pipeline waited for the kernel";
  ASSERT_EQ(cudaEventSynchronize(kernel_done_), cudaSuccess);
  EXPECT_TRUE(read_view(*v) == pattern(2, kBytes));
  ASSERT_OK(tm_->release("n").get());
}

// The flake of issue #5: a caller's write into a GPU view queued on the default stream (here a
// memset behind a 300 ms kernel; in the property test a cudaMemcpy from pageable memory, which
// may return before its DMA lands) must reach home, though the manager copies on its own
// non-blocking D2H stream. Without the ordering the writeback copies the old zeros.
TEST_F(GpuOverlap, WritebackWaitsForTheCallersDefaultStreamWrites) {
  constexpr uint64_t kSmall = 1 << 20;
  for (Tier home : {Tier::kPinned, Tier::kNvme}) {
    const std::string id = std::string("d-") + tier_name(home);
    ASSERT_OK(tm_->register_shard({id, kSmall, ElementType::kU8, home}));
    Result<ShardView> v = tm_->fetch(id, Tier::kGpu, Access::kWrite).get();
    ASSERT_OK(v);
    ASSERT_EQ(testing::launch_spin(cudaStreamLegacy, 300), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(v->data, 0xab, kSmall, cudaStreamLegacy), cudaSuccess);
    ASSERT_OK(tm_->writeback(id).get());
    ASSERT_OK(tm_->release(id).get());
    ASSERT_OK(tm_->evict(id, Tier::kGpu).get());
    Result<ShardView> back = tm_->fetch(id, Tier::kPinned).get();
    ASSERT_OK(back);
    EXPECT_EQ(testing::first_difference(std::vector<uint8_t>(kSmall, 0xab), read_view(*back)), "")
        << "home " << tier_name(home);
    ASSERT_OK(tm_->release(id).get());
  }
}

}  // namespace
}  // namespace tierzero::offload
