// The GPU peak the step line reports is CUDA's own peak-allocated counter for that step (skipped
// without a CUDA device).
#include <gtest/gtest.h>

#include <ATen/Context.h>
#ifdef TIERZERO_ENGINE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "engine/train/internal/step_report.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

TEST(Gpu, StepLinePeakIsTheAllocatorsPeak) {
#ifndef TIERZERO_ENGINE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  ScratchDir dir;
  // One step and nothing after it (no save, no export): the allocator's peak window, reset at the
  // step's start, is still the step's when train() returns.
  TrainRun run = run_train(train_args(
      write_config(dir, small_config({{"bf16", {{"enabled", true}}}, {"zero_optimization", {{"stage", 3}}}})), 1));
  ASSERT_OK(run.summary);
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
  const int64_t cuda_peak = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  EXPECT_GT(cuda_peak, 0);
  EXPECT_EQ(run.summary->gpu_peak_bytes, cuda_peak);
  const std::string expected = "gpu-peak " + trainer::bytes_text(cuda_peak) + "  ";
  bool found = false;
  for (const std::string& line : run.lines)
    found = found || (line.rfind("step ", 0) == 0 && line.find(expected) != std::string::npos);
  EXPECT_TRUE(found) << "no step line with '" << expected << "'";
#endif
}

}  // namespace
}  // namespace tierzero::engine::testing
