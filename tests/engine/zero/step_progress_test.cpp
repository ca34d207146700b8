// The optimizer step followed by the next forward (step_progress.h): a reader waits exactly until
// the prefix it reads is final, takes each queued copy once, sees the writer's failure as an error
// instead of waiting forever, and measures the idle gaps of its waits only when it blocked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "engine/zero/internal/step_progress.h"

namespace tierzero::engine::testing {
namespace {

class NoopDone final : public CopyDone {
 public:
  void wait_host() override {}
  void order_current_stream() override {}
  double seconds() override { return 0.0; }
};

PartitionWrite write_of(int64_t begin, int64_t count) { return {begin, count, std::make_shared<NoopDone>()}; }

// The idle gaps of a CPU "device" (its work runs when queued): the host's blocked time.
std::unique_ptr<DeviceCopies> cpu_copies() { return DeviceCopies::create(at::kCPU, /*timing=*/false); }

TEST(StepProgress, NothingStartedIsAllWritten) {
  StepProgress progress;
  const std::unique_ptr<DeviceCopies> copies = cpu_copies();
  progress.measure_idle(copies.get());
  EXPECT_TRUE(progress.wait_for(1000).empty());
  EXPECT_EQ(progress.take_idle_seconds(), 0.0);
}

TEST(StepProgress, APublishedPrefixIsReadWithoutWaitingAndEachWriteTakenOnce) {
  StepProgress progress;
  const std::unique_ptr<DeviceCopies> copies = cpu_copies();
  progress.measure_idle(copies.get());
  progress.start(100);
  progress.publish(40, {write_of(0, 40)});
  progress.publish(30, {});  // never goes back
  std::vector<PartitionWrite> writes = progress.wait_for(40);
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].begin, 0);
  progress.publish(100, {write_of(40, 60)});
  writes = progress.wait_for(1'000'000);  // past the end: the whole partition
  ASSERT_EQ(writes.size(), 1u);
  EXPECT_EQ(writes[0].begin, 40);
  EXPECT_TRUE(progress.wait_for(100).empty());  // each write is taken once
  EXPECT_EQ(progress.take_idle_seconds(), 0.0);
}

TEST(StepProgress, WaitBlocksUntilThePrefixIsPublished) {
  StepProgress progress;
  const std::unique_ptr<DeviceCopies> copies = cpu_copies();
  progress.measure_idle(copies.get());
  progress.start(3);
  std::atomic<int> published{0};
  std::thread writer([&] {
    for (int i = 1; i <= 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      published = i;
      progress.publish(i, {write_of(i - 1, 1)});
    }
  });
  size_t taken = progress.wait_for(2).size();
  EXPECT_GE(published.load(), 2);  // not before the second element
  taken += progress.wait_for(3).size();
  EXPECT_EQ(published.load(), 3);
  writer.join();
  taken += progress.wait_for(3).size();
  EXPECT_EQ(taken, 3u);
  EXPECT_GT(progress.take_idle_seconds(), 0.0);
  EXPECT_EQ(progress.take_idle_seconds(), 0.0);  // reset by the take
}

TEST(StepProgress, AFailureReachesTheWaiterAsItsError) {
  StepProgress progress;
  progress.start(10);
  progress.publish(4, {});
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    progress.fail(io_error("the disk went away"));
  });
  try {
    (void)progress.wait_for(10);
    ADD_FAILURE() << "wait_for returned after the writer failed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("the disk went away"), std::string::npos);
  }
  writer.join();
  EXPECT_THROW((void)progress.wait_for(4), Error);  // after a failure nothing may be read
}

TEST(StepProgress, StartingTheNextStepMakesNothingWrittenAgain) {
  StepProgress progress;
  const std::unique_ptr<DeviceCopies> copies = cpu_copies();
  progress.measure_idle(copies.get());
  progress.start(10);
  progress.publish(10, {});
  progress.start(10);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    progress.publish(10, {});
  });
  (void)progress.wait_for(1);
  writer.join();
  EXPECT_GT(progress.take_idle_seconds(), 0.0);
}

}  // namespace
}  // namespace tierzero::engine::testing
