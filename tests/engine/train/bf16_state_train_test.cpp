// tierzero.optimizer_state_dtype "bf16" end to end: the built-in tiny Llama trained 200 steps on the
// CPU (micro-batch 2 x 32 tokens, AdamW lr 3e-3, ZeRO-2, optimizer offloaded), m and v in bf16,
// against the same run with fp32 state.
//
// The two runs are the same bit for bit until m and v first round differently (steps 1 and 2 at
// least: the first update uses m and v before they are stored), then drift apart as any two
// trainings do; what must hold is the curve. Measured on the CI box (2026-12-01): the per-step losses
// differ by up to 11.7 % (step 173; 1.6 % on average), the means of each 10 steps by at most 3.1 %,
// the means of the last 50 steps by 1.5 %. Tolerances: 6 % for every 10-step mean, 3 % for the last
// 50 steps' mean — about twice what was measured, as another SIMD target or BLAS rounds otherwise.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

constexpr int kSteps = 200;
constexpr double kWindowTolerance = 0.06;  // each 10-step mean, relative
constexpr double kTailTolerance = 0.03;    // the last 50 steps' mean, relative

double mean_of(const std::vector<double>& losses, size_t begin, size_t n) {
  return std::accumulate(losses.begin() + static_cast<std::ptrdiff_t>(begin),
                         losses.begin() + static_cast<std::ptrdiff_t>(begin + n), 0.0) /
         static_cast<double>(n);
}

TEST(Bf16StateTraining, LossCurveStaysWithinToleranceOfFp32State) {
  ScratchDir dir;
  nlohmann::json fp32 = {{"zero_optimization", {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}}}}}};
  nlohmann::json bf16 = fp32;
  bf16["tierzero"]["optimizer_state_dtype"] = "bf16";
  TrainRun fp32_run = run_train(train_args(write_config(dir, small_config(fp32), "fp32.json"), kSteps));
  TrainRun bf16_run = run_train(train_args(write_config(dir, small_config(bf16), "bf16.json"), kSteps));
  ASSERT_OK(fp32_run.summary);
  ASSERT_OK(bf16_run.summary);
  const std::vector<double>& want = fp32_run.summary->losses;
  const std::vector<double>& got = bf16_run.summary->losses;
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(got[0], want[0]) << "before any update";
  EXPECT_EQ(got[1], want[1]) << "after the first update, which m and v enter before they are rounded";
  double worst_window = 0.0;
  for (size_t begin = 0; begin < static_cast<size_t>(kSteps); begin += 10) {
    const double fp32_mean = mean_of(want, begin, 10), bf16_mean = mean_of(got, begin, 10);
    worst_window = std::max(worst_window, std::abs(bf16_mean - fp32_mean) / fp32_mean);
    EXPECT_NEAR(bf16_mean, fp32_mean, kWindowTolerance * fp32_mean) << "steps " << begin + 1 << "-" << begin + 10;
  }
  const double tail_want = mean_of(want, kSteps - 50, 50), tail_got = mean_of(got, kSteps - 50, 50);
  std::printf("bf16 vs fp32 state: worst 10-step mean difference %.4f, last 50 steps %.5f vs %.5f\n", worst_window,
              tail_got, tail_want);
  EXPECT_NEAR(tail_got, tail_want, kTailTolerance * tail_want);
  EXPECT_LT(tail_got, 0.8 * want[0]) << "bf16 state trained";
  EXPECT_NE(got, want) << "bf16 rounding of m and v changed nothing: is the state really bf16?";
}

}  // namespace
}  // namespace tierzero::engine::testing
