// bf16 optimizer state (ZeroEngineOptions::optimizer_state_dtype, tierzero.optimizer_state_dtype):
// m and v held in bf16, the master in fp32, in the CPU-offloaded and the NVMe optimizers.
//
// The reference is the fp32-state engine: cpu_adam widens bf16 m, v exactly, computes in fp32 and
// rounds the new m, v to nearest even, so every step of a bf16-state engine must equal, bit for
// bit, one step of an fp32-state engine started from the same master and the widened m, v —
// master equal, and m, v equal to the fp32 engine's rounded by torch's own fp32 -> bf16 cast.
// The first step starts from zero moments, where both engines start anyway. The NVMe optimizer
// with bf16 state equals the host one bit for bit and moves 8 bytes an element each way, and a
// checkpoint keeps the moments as bf16 sections that resume reads back into either state dtype.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "offload_engine.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && at::equal(a, b);
}

// Empty when `bf16` holds what one fp32-state step gives rounded: the same master, and m, v equal
// to `fp32`'s cast to bf16 (round to nearest even); else what differs.
std::string compare_rounded(AdamPartitionState& bf16, AdamPartitionState& fp32) {
  std::string diff;
  if (bf16.step != fp32.step) diff += " step";
  if (!same_bits(bf16.master, fp32.master)) diff += " master";
  if (!same_bits(bf16.exp_avg, fp32.exp_avg.to(at::kBFloat16))) diff += " exp_avg";
  if (!same_bits(bf16.exp_avg_sq, fp32.exp_avg_sq.to(at::kBFloat16))) diff += " exp_avg_sq";
  return diff;
}

class Bf16State : public ::testing::TestWithParam<std::tuple<int, at::ScalarType>> {};

TEST_P(Bf16State, EachStepIsTheFp32StepFromWidenedMomentsRounded) {
  const auto [stage, compute] = GetParam();
  OffloadEngine bf16({.stage = stage, .compute = compute, .state = at::kBFloat16});
  OffloadEngine fp32({.stage = stage, .compute = compute, .state = at::kFloat});
  ASSERT_EQ(bf16.state().exp_avg.scalar_type(), at::kBFloat16);
  ASSERT_EQ(bf16.state().master.scalar_type(), at::kFloat);
  for (int step = 0; step < 8; ++step) {
    // The fp32 engine starts from the bf16 engine's state: the same master, m and v widened.
    fp32.state().master.copy_(bf16.state().master);
    fp32.state().exp_avg.copy_(bf16.state().exp_avg);
    fp32.state().exp_avg_sq.copy_(bf16.state().exp_avg_sq);
    fp32.engine->sync_compute_params();
    const double loss_bf16 = bf16.train_step(step);
    const double loss_fp32 = fp32.train_step(step);
    EXPECT_EQ(loss_bf16, loss_fp32) << "step " << step;
    EXPECT_EQ(compare_rounded(bf16.state(), fp32.state()), "") << "after step " << step + 1;
  }
  // The moments did move, and bf16 rounding made the runs' states differ from an untouched fp32 run.
  OffloadEngine plain({.stage = stage, .compute = compute, .state = at::kFloat});
  for (int step = 0; step < 8; ++step) plain.train_step(step);
  EXPECT_GT(bf16.state().exp_avg_sq.abs().max().item<float>(), 0.0f);
  EXPECT_FALSE(at::equal(bf16.state().exp_avg_sq.to(at::kFloat), plain.state().exp_avg_sq));
}

INSTANTIATE_TEST_SUITE_P(Stages, Bf16State,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(at::kFloat, at::kBFloat16)),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == at::kFloat ? "_fp32" : "_bf16");
                         });

TEST(Bf16StateNvme, EqualsHostStateBitForBitAndMovesEightBytesAnElement) {
  test_support::ScratchDir nvme("bf16-state-nvme");
  OffloadEngine host({.stage = 3, .compute = at::kBFloat16, .state = at::kBFloat16});
  OffloadEngine on_nvme({.stage = 3, .compute = at::kBFloat16, .state = at::kBFloat16, .nvme_dir = nvme.path()});
  const int64_t numel = on_nvme.engine->partitioner().partition_numel();
  // Passes alternate direction and keep their last 3 sub-groups in the 3 buffers (6 sub-groups):
  // two consecutive steps move every element once each way.
  uint64_t read = 0, written = 0;
  for (int step = 0; step < 6; ++step) {
    EXPECT_EQ(on_nvme.train_step(step), host.train_step(step)) << "step " << step;
    on_nvme.engine->finish_step();  // stage 3's step runs on after step(): the traffic is a finished step's
    const NvmeTraffic traffic = on_nvme.engine->nvme_traffic();
    read += traffic.step_read_bytes;
    written += traffic.step_written_bytes;
    if (step % 2 == 1) {
      EXPECT_EQ(read, static_cast<uint64_t>(8 * numel)) << "fp32 master + bf16 m, v; steps " << step - 1 << ", " << step;
      EXPECT_EQ(written, static_cast<uint64_t>(8 * numel));
      read = written = 0;
    }
  }
  AdamPartitionState& a = on_nvme.state();  // read back from the swap files
  AdamPartitionState& b = host.state();
  EXPECT_TRUE(same_bits(a.master, b.master));
  EXPECT_TRUE(same_bits(a.exp_avg, b.exp_avg));
  EXPECT_TRUE(same_bits(a.exp_avg_sq, b.exp_avg_sq));
}

TEST(Bf16StateCheckpoint, MomentsAreBf16SectionsThatResumeReadsIntoEitherDtype) {
  test_support::ScratchDir dir("bf16-state-ckpt");
  OffloadEngine saved({.stage = 2, .state = at::kBFloat16});
  for (int step = 0; step < 3; ++step) saved.train_step(step);
  ASSERT_OK(save_engine_checkpoint(dir.path(), *saved.engine, CheckpointExtras{.iteration = 3}));

  ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                       checkpoint::CheckpointReader::open(dir.path()));
  const checkpoint::FlatGroup& group = reader->manifest().groups.at(0);
  ASSERT_EQ(group.states.size(), 3u);
  EXPECT_EQ(group.states[0].dtype, ElementType::kF32);
  EXPECT_EQ(group.states[1].dtype, ElementType::kBF16);
  EXPECT_EQ(group.states[2].dtype, ElementType::kBF16);

  // Resumed into bf16 state (host and NVMe): the saved state bit for bit, and the same next steps.
  test_support::ScratchDir nvme("bf16-state-nvme");
  for (const std::string& nvme_dir : {std::string(), nvme.path()}) {
    OffloadEngine resumed({.stage = 2, .state = at::kBFloat16, .nvme_dir = nvme_dir});
    ASSERT_OK(load_engine_checkpoint(dir.path(), *resumed.engine).status());
    EXPECT_EQ(compare_rounded(resumed.state(), saved.state()), "") << (nvme_dir.empty() ? "host" : "nvme");
    OffloadEngine uninterrupted({.stage = 2, .state = at::kBFloat16});
    for (int step = 0; step < 5; ++step) {
      const double want = uninterrupted.train_step(step);
      if (step >= 3) EXPECT_EQ(resumed.train_step(step), want) << "step " << step;
    }
    EXPECT_TRUE(same_bits(resumed.state().master, uninterrupted.state().master));
    EXPECT_TRUE(same_bits(resumed.state().exp_avg_sq, uninterrupted.state().exp_avg_sq));
  }

  // Into fp32 state: the bf16 moments widened exactly.
  OffloadEngine widened({.stage = 2, .state = at::kFloat});
  ASSERT_OK(load_engine_checkpoint(dir.path(), *widened.engine).status());
  EXPECT_TRUE(same_bits(widened.state().master, saved.state().master));
  EXPECT_TRUE(same_bits(widened.state().exp_avg, saved.state().exp_avg.to(at::kFloat)));
  EXPECT_TRUE(same_bits(widened.state().exp_avg_sq, saved.state().exp_avg_sq.to(at::kFloat)));
}

TEST(Bf16StateErrors, TheOptimizerOnTheDeviceKeepsFp32State) {
  ZeroEngineOptions options;
  options.optimizer_state_dtype = at::kBFloat16;  // without offload_optimizer
  std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCPU));
  std::unique_ptr<FunctionalModel> model = make_causal_lm(test_model_config(true));
  try {
    ZeroEngine engine(*model, init_parameters(test_model_config(true), 42, at::kFloat, at::kCPU), options, *comm);
    FAIL() << "bf16 state on the device optimizer was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("tierzero.optimizer_state_dtype"), std::string::npos) << e.what();
    EXPECT_NE(e.status().message().find("offload_optimizer.device"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
