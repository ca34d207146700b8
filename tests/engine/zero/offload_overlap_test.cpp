// The overlapped offloaded step (gradients leave the device and are added on the CPU while backward
// runs; CPU Adam sub-group by sub-group; at stage 3 the step running on into the next window's
// forwards, which run unit by unit across the micro-batches) equals the plain synchronous path
// through the same kernels bit for bit: losses, gradient norms and master weights over 20 steps, stages 1-3, fp32 and
// bf16, gradient accumulation 1 and 4, sub-groups smaller than the partition, 1 and 2 ranks (Gloo),
// and on one GPU where there is one; staging slots smaller than a bucket. The device accumulator
// (micro-batches summed on the device, one landing per step) equals the host one the same way. Also: the pinned budget
// is checked against tierzero.pinned_memory_limit before anything is allocated.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "engine/zero/zero_engine.h"
#include "rank_launcher.h"
#include "scenario.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

// The test model's stage 3 shard is 9824 elements on one rank: sub-groups of 3000 split it in 4.
constexpr int64_t kSubGroup = 3000;

Scenario overlap_scenario(int stage, const std::string& dtype, int accumulation) {
  Scenario s;
  s.stage = stage;
  s.offload = true;
  s.dtype = dtype;
  s.accumulation = accumulation;
  s.steps = 20;
  s.sub_group_numel = kSubGroup;
  s.clip = 0.5;  // clips some steps: the norm recorded while landing decides the factor
  return s;
}

class OffloadOverlap : public ::testing::TestWithParam<std::tuple<int, std::string, int>> {};

// Stage 3's overlapped windows run unit by unit both ways (window_pass.h): one rank equals the
// micro-batch path bit for bit when no weight is tied (a tied weight's two uses are summed in another
// fp32 order); two ranks sum each rank's window before reducing, so they are checked against the
// reference within tolerances instead.
bool window_reorders(const Scenario& s) { return s.stage == 3 && s.accumulation > 1; }

TEST_P(OffloadOverlap, OneRankEqualsPlainPathBitForBit) {
  Scenario s = overlap_scenario(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()));
  s.staging_buffers = 1;  // backward waits for the worker's only slot: the blocking path runs too
  if (window_reorders(s)) s.tied = false;
  const TrainTrace overlapped = train_one_rank(s);
  s.overlap = false;
  EXPECT_EQ(compare_exactly(overlapped, train_one_rank(s)), "") << s.name();
}

TEST_P(OffloadOverlap, TwoRanksEqualPlainPathBitForBit) {
  Scenario s = overlap_scenario(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()));
  s.world_size = 2;
  if (window_reorders(s)) {
    if (s.dtype != "fp32") s.steps = 6;  // bf16 drifts from the fp32 reference step by step
    EXPECT_EQ(run_ranks(s, s.dtype == "fp32" ? 1e-4 : 2e-2, s.dtype == "fp32" ? 1e-4 : 5e-2), "") << s.name();
    return;
  }
  s.compare_overlap = true;
  EXPECT_EQ(run_ranks(s, 0.0, 0.0), "") << s.name();
}

// "stage3_bf16_acc4": the test name of a (stage, dtype, accumulation) parameter.
std::string StageDtypeAccumulationName(const ::testing::TestParamInfo<std::tuple<int, std::string, int>>& info) {
  return "stage" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_acc" +
         std::to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Stages, OffloadOverlap,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values("fp32", "bf16"),
                                            ::testing::Values(1, 4)),
                         StageDtypeAccumulationName);

// The device accumulator (micro-batches 1..A-1 summed in fp32 on the compute device, only the last
// micro-batch's buckets landing, carrying the sum) equals the host accumulator bit for bit: losses,
// gradient norms (the clip factor: clip 0.5 clips some steps) and master weights. The CPU stands in
// for the device; 2 ranks: 1/W = 0.5 is exact.
class DeviceAccumulator : public ::testing::TestWithParam<std::tuple<int, std::string, int>> {};

TEST_P(DeviceAccumulator, OneRankEqualsHostAccumulatorBitForBit) {
  Scenario s = overlap_scenario(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()));
  s.grad_accumulator = "device";
  const TrainTrace on_device = train_one_rank(s);
  s.grad_accumulator = "host";
  EXPECT_EQ(compare_exactly(on_device, train_one_rank(s)), "") << s.name();
}

TEST_P(DeviceAccumulator, TwoRanksEqualHostAccumulatorBitForBit) {
  Scenario s = overlap_scenario(std::get<0>(GetParam()), std::get<1>(GetParam()), std::get<2>(GetParam()));
  s.world_size = 2;
  s.grad_accumulator = "device";
  s.compare_accumulator = true;
  EXPECT_EQ(run_ranks(s, 0.0, 0.0), "") << s.name();
}

INSTANTIATE_TEST_SUITE_P(Stages, DeviceAccumulator,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values("fp32", "bf16"),
                                            ::testing::Values(1, 4)),
                         StageDtypeAccumulationName);

// The same through the synchronous path, through staging slots far smaller than a bucket, with
// bf16 gradient buckets in small slots (the host lands them as bf16, the device as fp32 sums: both
// are cut at the same elements, so the run norms match), and with the parameter shard offloaded.
TEST(DeviceAccumulatorPaths, PlainPiecesBf16BucketsAndOffloadedParametersEqualHostAccumulator) {
  for (int stage : {1, 2, 3}) {
    for (int variant = 0; variant < 4; ++variant) {
      if (variant == 3 && stage != 3) continue;
      Scenario s = overlap_scenario(stage, "bf16", 4);
      s.steps = 6;
      s.overlap = variant != 0;
      if (variant == 1 || variant == 2) s.staging_slot_bytes = 256;  // 64 elements; buckets are up to 1000
      if (variant == 2) s.grad_dtype = "bf16";
      s.offload_params = variant == 3;
      s.grad_accumulator = "device";
      const TrainTrace on_device = train_one_rank(s);
      s.grad_accumulator = "host";
      EXPECT_EQ(compare_exactly(on_device, train_one_rank(s)), "") << s.name();
    }
  }
}

// A window that ends before the engine's configured last micro-batch (step() after 3 of 4): the
// accumulator lands whole when step() drains it. The values are the same bits (without clipping:
// the norm is summed over other runs, so it may differ in its last bits).
TEST(DeviceAccumulatorPaths, WindowEndingEarlyLandsTheWholeAccumulator) {
  for (int stage : {1, 3}) {
    Scenario s = overlap_scenario(stage, "bf16", 3);
    s.steps = 5;
    s.clip = 0.0;
    s.window_steps = 4;
    s.grad_accumulator = "device";
    TrainTrace on_device = train_one_rank(s);
    s.grad_accumulator = "host";
    TrainTrace on_host = train_one_rank(s);
    on_device.grad_norms.clear();
    on_host.grad_norms.clear();
    EXPECT_EQ(compare_exactly(on_device, on_host), "") << s.name();
  }
}

// Where the engine accumulates, and the sentence the trainer prints: the key forces either; "auto"
// keeps the host without a GPU or without accumulation.
TEST(DeviceAccumulatorChoice, AutoNeedsAGpuAndAccumulationTheKeyForcesEither) {
  ModelConfig config = test_model_config(true);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  const auto engine_with = [&](GradAccumulator accumulator, int64_t window) {
    ZeroEngineOptions options;
    options.partition.stage = 2;
    options.offload_optimizer = true;
    options.grad_accumulator = accumulator;
    options.gradient_accumulation_steps = window;
    return std::make_unique<ZeroEngine>(*model, init_parameters(config, 7, at::kFloat, at::kCPU), options, *comm);
  };
  std::unique_ptr<ZeroEngine> engine = engine_with(GradAccumulator::kAuto, 4);
  EXPECT_FALSE(engine->grad_accumulation_on_device());
  EXPECT_NE(engine->grad_accumulator_choice().find("host (no GPU"), std::string::npos)
      << engine->grad_accumulator_choice();
  engine = engine_with(GradAccumulator::kDevice, 4);
  EXPECT_TRUE(engine->grad_accumulation_on_device());
  EXPECT_NE(engine->grad_accumulator_choice().find("tierzero.offload_grad_accumulator"), std::string::npos);
  engine = engine_with(GradAccumulator::kHost, 4);
  EXPECT_FALSE(engine->grad_accumulation_on_device());
  engine = engine_with(GradAccumulator::kAuto, 1);
  EXPECT_NE(engine->grad_accumulator_choice().find("one micro-batch per step"), std::string::npos)
      << engine->grad_accumulator_choice();
}

// Sub-groups change nothing: Adam is elementwise, so any split gives the same weights.
TEST(OffloadOverlapSubGroups, AnySplitGivesTheSameWeights) {
  Scenario s = overlap_scenario(3, "bf16", 2);
  s.steps = 5;
  const TrainTrace split = train_one_rank(s);
  s.sub_group_numel = 1'000'000'000;
  EXPECT_EQ(compare_exactly(split, train_one_rank(s)), "");
}

// Stage 3 with the parameter shard offloaded too: the optimizer writes the pinned shard in place.
TEST(OffloadOverlapSubGroups, OffloadedParametersEqualPlainPath) {
  for (const char* dtype : {"fp32", "bf16"}) {
    Scenario s = overlap_scenario(3, dtype, 2);
    s.offload_params = true;
    s.tied = false;  // exact: see window_reorders
    s.steps = 10;
    const TrainTrace overlapped = train_one_rank(s);
    s.overlap = false;
    EXPECT_EQ(compare_exactly(overlapped, train_one_rank(s)), "") << s.name();
  }
}

// Staging slots far smaller than a bucket: each bucket leaves in slot-sized pieces, and the result
// still equals the plain path bit for bit, and the unsplit run up to the norm's summation order.
TEST(OffloadStagingSlots, BucketsLargerThanASlotLandInPieces) {
  for (int stage : {1, 2, 3}) {
    Scenario s = overlap_scenario(stage, "bf16", 2);
    s.steps = 5;
    s.staging_slot_bytes = 256;  // 64 elements (a slot's worth of fp32); buckets are up to 1000
    const TrainTrace split = train_one_rank(s);
    s.overlap = false;
    EXPECT_EQ(compare_exactly(split, train_one_rank(s)), "") << s.name();
    s.staging_slot_bytes = Scenario().staging_slot_bytes;
    EXPECT_EQ(compare_traces(split, train_one_rank(s), 1e-6, 1e-6), "") << s.name();
  }
}

// The test model (seed-7 weights) on one CPU rank with the optimizer offloaded at `stage`; the other
// options as the test sets them before engine().
struct CpuOffloadRun {
  explicit CpuOffloadRun(int stage) {
    options.partition.stage = stage;
    options.offload_optimizer = true;
  }
  std::unique_ptr<ZeroEngine> engine() {
    return std::make_unique<ZeroEngine>(*model, init_parameters(config, 7, at::kFloat, at::kCPU), options, *comm);
  }

  ModelConfig config = test_model_config(true);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  ZeroEngineOptions options;
};

TEST(OffloadBudget, PinnedLimitIsCheckedBeforeAllocating) {
  CpuOffloadRun run(3);
  run.options.pinned_memory_limit_bytes = 4096;
  try {
    run.engine();
    ADD_FAILURE() << "a 4 KiB pinned limit held the offloaded step";
  } catch (const Error& e) {
    const std::string message = e.status().message();
    EXPECT_NE(message.find("tierzero.pinned_memory_limit"), std::string::npos) << message;
    EXPECT_NE(message.find("4096 bytes"), std::string::npos) << message;
    EXPECT_NE(message.find("optimizer records kept in pinned memory"), std::string::npos) << message;
  }
}

TEST(OffloadTimes, BreakdownIsFilledWhenAsked) {
  CpuOffloadRun run(2);
  run.options.time_breakdown = true;
  const std::unique_ptr<ZeroEngine> built = run.engine();
  ZeroEngine& engine = *built;
  at::Tensor tokens = at::randint(64, {2, 9}, at::kLong);
  engine.forward_backward(tokens.narrow(1, 0, 8), tokens.narrow(1, 1, 8), 1.0);
  engine.step(1e-3, 1.0);
  const StepTimes& t = engine.last_step_times();
  EXPECT_GT(t.forward_s, 0.0);
  EXPECT_GT(t.backward_s, 0.0);
  EXPECT_GT(t.cpu_optimizer_s, 0.0);
  EXPECT_GE(t.gpu_idle_s, t.cpu_optimizer_s);
}

// Stage 3's step follows into the next forward: Adam runs on its own thread after step() returns,
// and its time is counted in the step during whose forwards it ran.
TEST(OffloadTimes, AFollowedStepCountsInTheStepItRanIn) {
  CpuOffloadRun run(3);
  run.options.gradient_accumulation_steps = 2;
  run.options.time_breakdown = true;
  const std::unique_ptr<ZeroEngine> built = run.engine();
  ZeroEngine& engine = *built;
  ASSERT_TRUE(engine.follows_step());
  at::Tensor tokens = at::randint(64, {2, 9}, at::kLong);
  const std::vector<TokenBatch> window(2, TokenBatch{tokens.narrow(1, 0, 8), tokens.narrow(1, 1, 8)});
  for (int step = 0; step < 2; ++step) {
    engine.queue_window(window, 0.5);
    engine.step(1e-3, 1.0);
  }
  EXPECT_EQ(engine.forward_window_choice().rfind("unit by unit across 2 micro-batches", 0), 0u)
      << engine.forward_window_choice();
  const StepTimes& t = engine.last_step_times();  // the second step: the first step's Adam ran in it
  EXPECT_GT(t.cpu_optimizer_s, 0.0);
  EXPECT_GE(t.forward_s, 0.0);
  EXPECT_GT(t.backward_s, 0.0);
  EXPECT_GE(t.gpu_idle_s, 0.0);
}

// On a GPU the copies really run on side streams, and each unit's fetch or gather waits only for the
// sub-groups (3000 elements: several per run) holding its parameters; staging slots of 256 bytes
// make every bucket leave in pieces. Stage 3 runs its windows unit by unit behind a step on another
// thread, with the parameter shard on the GPU (the step's copies on the side stream) and in pinned
// host memory (written in place, read by the gathers' copies).
TEST(OffloadOverlapGpu, OneGpuEqualsPlainPathBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (auto [stage, offload_params] : {std::pair{1, false}, {2, false}, {3, false}, {3, true}}) {
    for (int64_t slot_bytes : {Scenario().staging_slot_bytes, int64_t{256}}) {
      Scenario s = overlap_scenario(stage, "bf16", 4);
      s.device = "cuda";
      s.offload_params = offload_params;
      if (window_reorders(s)) s.tied = false;
      s.staging_slot_bytes = slot_bytes;
      const TrainTrace overlapped = train_one_rank(s);
      s.overlap = false;
      EXPECT_EQ(compare_exactly(overlapped, train_one_rank(s)), "") << s.name();
    }
  }
}

// On a GPU "auto" takes the device when the planner's peak plus the accumulator fits the GPU's memory.
TEST(DeviceAccumulatorGpu, AutoTakesTheDeviceWhenTheAccumulatorFits) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  ModelConfig config = test_model_config(true);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCUDA, 0));
  for (const uint64_t planned_peak : {uint64_t{1} << 20, uint64_t{1} << 50}) {  // 1 MiB fits, 1 PiB does not
    ZeroEngineOptions options;
    options.partition.stage = 3;
    options.offload_optimizer = true;
    options.gradient_accumulation_steps = 4;
    options.planned_gpu_peak_bytes = planned_peak;
    ZeroEngine engine(*model, init_parameters(config, 7, at::kFloat, at::kCPU), options, *comm);
    EXPECT_EQ(engine.grad_accumulation_on_device(), planned_peak == uint64_t{1} << 20)
        << engine.grad_accumulator_choice();
  }
}

// On a GPU the accumulator's additions run on the current stream, ordered after each reduction and
// before the landing copies on the D2H stream: the same bits as the host accumulator.
TEST(DeviceAccumulatorGpu, OneGpuEqualsHostAccumulatorBitForBit) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  for (int stage : {1, 2, 3}) {
    for (int64_t slot_bytes : {Scenario().staging_slot_bytes, int64_t{256}}) {
      Scenario s = overlap_scenario(stage, "bf16", 4);
      s.device = "cuda";
      s.staging_slot_bytes = slot_bytes;
      s.grad_accumulator = "device";
      const TrainTrace on_device = train_one_rank(s);
      s.grad_accumulator = "host";
      EXPECT_EQ(compare_exactly(on_device, train_one_rank(s)), "") << s.name();
    }
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
