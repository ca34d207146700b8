// The ZeRO engine reproduces plain single-process training: stages 0-3, with and without the CPU
// optimizer, on 1, 2 and 4 ranks over Gloo (CUDA + NCCL where a GPU exists), gradient
// accumulation equal to the larger batch, clipping, bf16 compute, and fp16 overflow skipping.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>

#include "engine/config/loss_scaler.h"
#include "engine/zero/zero_engine.h"
#include "rank_launcher.h"
#include "scenario.h"

namespace tierzero::engine::testing {
namespace {

// fp32 end to end: only the order of floating-point sums differs from the reference.
constexpr double kLossRtol = 1e-5;
constexpr double kParamAtol = 2e-5;
// bf16 weights and activations keep about 3 significant digits: losses agree to 2%. Adam moves a
// weight by up to about lr (1e-2) a step whatever the gradient's size, and bf16 rounding can flip
// the sign of a near-zero gradient, so after 3 steps weights are only bounded by 5e-2.
constexpr double kBf16LossRtol = 2e-2;
constexpr double kBf16ParamAtol = 5e-2;

bool has_cuda() { return at::hasCUDA(); }

// One intra-op thread, as the rank workers use: the models are tiny, and OpenMP's spinning threads
// are many times slower than one on a busy 2-core machine.
class OneCpuThread : public ::testing::Environment {
 public:
  void SetUp() override { at::set_num_threads(1); }
};
::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

// ---- One process, no process group -----------------------------------------------------------

class ZeroSingleProcess : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ZeroSingleProcess, MatchesReference) {
  Scenario s;
  s.stage = std::get<0>(GetParam());
  s.offload = std::get<1>(GetParam());
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  std::string mismatch = compare_traces(train_with_engine(s, *comm), train_reference(s), kLossRtol, kParamAtol);
  EXPECT_EQ(mismatch, "") << s.name();
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroSingleProcess, ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_offload" : "");
                         });

TEST(ZeroSingleProcess, Bf16ComputeTracksReference) {
  Scenario s;
  s.stage = 3;
  s.dtype = "bf16";
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  EXPECT_EQ(compare_traces(train_with_engine(s, *comm), train_reference(s), kBf16LossRtol, kBf16ParamAtol), "");
}

TEST(ZeroSingleProcess, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  ModelConfig config = test_model_config(true);
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  ZeroEngineOptions options;
  options.partition.stage = 2;
  options.partition.compute_dtype = at::kHalf;
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  ZeroEngine engine(*model, init_parameters(config, 7, at::kFloat, at::kCPU), options, *comm);
  LossScaler scaler = value_or_throw(
      LossScaler::create(LossScalerConfig{.initial_scale_power = 32, .scale_window = 1000, .hysteresis = 1}));
  at::Tensor tokens = at::randint(64, {2, 9}, at::kLong);

  std::map<std::string, at::Tensor> before = engine.master_params();
  int skipped = 0;
  for (;;) {
    double scale = scaler.scale();
    engine.forward_backward(tokens.narrow(1, 0, 8), tokens.narrow(1, 1, 8), scale);
    StepOutcome outcome = engine.step(1e-3, scale);
    ASSERT_TRUE(scaler.update(outcome.overflow).ok());
    if (!outcome.overflow) break;
    ++skipped;
    EXPECT_EQ(scaler.scale(), scale / 2);
    for (const auto& [name, p] : engine.master_params()) ASSERT_TRUE(p.equal(before.at(name))) << name;
    ASSERT_LT(skipped, 40);
  }
  EXPECT_GT(skipped, 0);  // 2^32 overflows fp16 gradients
  EXPECT_FALSE(engine.master_params().at("model.norm.weight").equal(before.at("model.norm.weight")));
}

// ---- Several processes over a process group ----------------------------------------------------

class ZeroMultiRank : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

TEST_P(ZeroMultiRank, MatchesReference) {
  Scenario s;
  s.world_size = std::get<0>(GetParam());
  s.stage = std::get<1>(GetParam());
  s.offload = std::get<2>(GetParam());
  EXPECT_EQ(run_ranks(s, kLossRtol, kParamAtol), "") << s.name();
}

INSTANTIATE_TEST_SUITE_P(Gloo, ZeroMultiRank,
                         ::testing::Combine(::testing::Values(2, 4), ::testing::Values(0, 1, 2, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return "w" + std::to_string(std::get<0>(info.param)) + "_stage" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_offload" : "");
                         });

TEST(ZeroMultiRank, OneRankGlooGroupMatchesReference) {
  Scenario s;
  s.stage = 3;
  EXPECT_EQ(run_ranks(s, kLossRtol, kParamAtol), "");
}

TEST(ZeroMultiRank, GradientAccumulationEqualsTheLargerBatch) {
  for (int stage : {1, 2, 3}) {
    Scenario s;
    s.world_size = 2;
    s.stage = stage;
    s.accumulation = 3;
    s.offload = stage == 3;
    EXPECT_EQ(run_ranks(s, kLossRtol, kParamAtol), "") << s.name();
  }
}

TEST(ZeroMultiRank, ClipsByTheGlobalNorm) {
  for (int stage : {0, 2, 3}) {
    Scenario s;
    s.world_size = 2;
    s.stage = stage;
    s.clip = 0.05;  // well below the gradient norm of a fresh model
    EXPECT_EQ(run_ranks(s, kLossRtol, kParamAtol), "") << s.name();
  }
}

// ---- Checkpoints -------------------------------------------------------------------------------

TEST(ZeroCheckpoint, ResumeReproducesTheUninterruptedRunExactly) {
  std::string dir = make_temp_dir();
  std::unique_ptr<Comm> comm = Comm::single(at::kCPU);
  for (int stage : {0, 2, 3}) {
    Scenario whole;
    whole.stage = stage;
    whole.offload = stage == 3;
    whole.steps = 4;
    TrainTrace uninterrupted = train_with_engine(whole, *comm);
    Scenario first_half = whole;
    first_half.steps = 2;
    first_half.save_dir = dir + "/stage" + std::to_string(stage);
    train_with_engine(first_half, *comm);
    Scenario second_half = whole;
    second_half.resume_dir = first_half.save_dir;
    TrainTrace resumed = train_with_engine(second_half, *comm);
    EXPECT_EQ(resumed.first_step, 2);
    EXPECT_EQ(compare_traces(resumed, uninterrupted, 0.0, 0.0), "") << whole.name();  // bit for bit
  }
  remove_tree(dir);
}

TEST(ZeroCheckpoint, ResumesOnAnotherWorldSize) {
  std::string dir = make_temp_dir();
  for (int stage : {1, 3}) {
    Scenario saved;
    saved.stage = stage;
    saved.world_size = 2;
    saved.steps = 2;
    saved.save_dir = dir + "/stage" + std::to_string(stage);
    ASSERT_EQ(run_ranks(saved, kLossRtol, kParamAtol), "") << saved.name();
    Scenario resumed = saved;
    resumed.world_size = stage == 1 ? 4 : 1;
    resumed.micro_batch = saved.micro_batch * saved.world_size / resumed.world_size;  // same global batch
    resumed.steps = 4;
    resumed.save_dir.clear();
    resumed.resume_dir = saved.save_dir;
    EXPECT_EQ(run_ranks(resumed, kLossRtol, kParamAtol), "") << resumed.name();
  }
  remove_tree(dir);
}

// ---- GPU: CUDA kernels, NCCL -------------------------------------------------------------------

TEST(ZeroGpu, StagesOnOneGpuWithNccl) {
  if (!has_cuda()) GTEST_SKIP() << "no CUDA device";
  for (int stage : {0, 1, 2, 3}) {
    for (bool offload : {false, true}) {
      Scenario s;
      s.device = "cuda";
      s.stage = stage;
      s.offload = offload;
      // CUDA kernels sum in other orders than the CPU reference.
      EXPECT_EQ(run_ranks(s, 1e-4, 1e-4), "") << s.name();
    }
  }
}

TEST(ZeroGpu, Bf16OnCudaTracksReference) {
  if (!has_cuda()) GTEST_SKIP() << "no CUDA device";
  for (bool offload : {false, true}) {
    Scenario s;
    s.device = "cuda";
    s.stage = 3;
    s.dtype = "bf16";
    s.offload = offload;
    EXPECT_EQ(run_ranks(s, kBf16LossRtol, kBf16ParamAtol), "") << s.name();
  }
}

TEST(ZeroGpu, TwoGpusWithNccl) {
  if (!has_cuda() || at::getNumGPUs() < 2) GTEST_SKIP() << "fewer than 2 CUDA devices";
  for (int stage : {1, 2, 3}) {
    Scenario s;
    s.device = "cuda";
    s.world_size = 2;
    s.stage = stage;
    EXPECT_EQ(run_ranks(s, 1e-4, 1e-4), "") << s.name();
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
