// Optimizer state on NVMe (offload_optimizer.device "nvme", record_adam.h) against the
// CPU-offloaded optimizer with the state in host memory: the same losses and master weights bit for
// bit over 12 steps — stages 1-3, fp32 and bf16, sub-groups smaller than the partition, pipelined
// and synchronous reads and writes, 1 to 4 buffers, 1 and 2 ranks (Gloo), and across a save and
// resume; on one GPU where there is one. The bytes moved per step are the records the buffers do
// not hold, read once and written once (passes alternate direction and keep their last records). A path that cannot be
// written and a disk that fills are errors naming the file, the offset and the fix. The scratch directory stands in for
// the drive.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <map>

#include "engine/model/functional_model.h"
#include "engine/zero/zero_engine.h"
#include "nvme/testing/fault_injection.h"
#include "rank_launcher.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

// The test model's stage 3 shard is 9824 elements on one rank: sub-groups of 3000 split it in 4.
constexpr int64_t kSubGroup = 3000;
// Fewer buffers than sub-groups, so that every step reads and writes records.
constexpr int kBuffers = 2;

using test_support::ScratchDir;

Scenario cpu_scenario(int stage, const std::string& dtype) {
  Scenario s;
  s.stage = stage;
  s.offload = true;
  s.dtype = dtype;
  s.steps = 12;
  s.sub_group_numel = kSubGroup;
  s.nvme_buffers = kBuffers;
  s.clip = 0.5;
  return s;
}

class NvmeOptimizer : public ::testing::TestWithParam<std::tuple<int, std::string, bool>> {};

TEST_P(NvmeOptimizer, OneRankEqualsHostStateBitForBit) {
  ScratchDir nvme;
  Scenario s = cpu_scenario(std::get<0>(GetParam()), std::get<1>(GetParam()));
  const TrainTrace host = train_one_rank(s);
  s.nvme_dir = nvme.path();
  s.nvme_pipeline = std::get<2>(GetParam());
  EXPECT_EQ(compare_exactly(train_one_rank(s), host), "") << s.name();
}

TEST_P(NvmeOptimizer, TwoRanksEqualHostStateBitForBit) {
  ScratchDir nvme;
  Scenario s = cpu_scenario(std::get<0>(GetParam()), std::get<1>(GetParam()));
  s.world_size = 2;
  s.nvme_dir = nvme.path();
  s.nvme_pipeline = std::get<2>(GetParam());
  s.compare_nvme = true;
  EXPECT_EQ(run_ranks(s, 0.0, 0.0), "") << s.name();
}

INSTANTIATE_TEST_SUITE_P(Stages, NvmeOptimizer,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values("fp32", "bf16"),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param) +
                                  (std::get<2>(info.param) ? "_pipelined" : "_sync");
                         });

// At stage 3 the NVMe step follows into the next window's forwards, published sub-group by
// sub-group: the same bits as the plain synchronous step.
TEST(NvmeOptimizerFollowed, EqualsThePlainStepBitForBit) {
  for (const char* dtype : {"fp32", "bf16"}) {
    ScratchDir followed_dir, plain_dir;
    Scenario s = cpu_scenario(3, dtype);
    s.accumulation = 2;
    s.tied = false;  // the followed step's window sums a tied weight's two uses in another order (window_pass.h)
    s.nvme_dir = followed_dir.path();
    const TrainTrace followed = train_one_rank(s);
    s.nvme_dir = plain_dir.path();
    s.overlap = false;
    EXPECT_EQ(compare_exactly(followed, train_one_rank(s)), "") << s.name();
  }
}

// On a GPU: bf16 weights go to the device from the 16-bit staging buffer, fp32 ones from the NVMe
// buffer itself (which is not reused before that copy ran).
TEST(NvmeOptimizerGpu, OneGpuEqualsHostStateBitForBit) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) GTEST_SKIP() << "no CUDA device";
  for (const char* dtype : {"fp32", "bf16"}) {
    for (int buffers : {1, 4}) {
      ScratchDir nvme;
      Scenario s = cpu_scenario(3, dtype);
      s.device = "cuda";
      const TrainTrace host = train_one_rank(s);
      s.nvme_dir = nvme.path();
      s.nvme_buffers = buffers;
      EXPECT_EQ(compare_exactly(train_one_rank(s), host), "") << s.name();
    }
  }
}

// Any buffer count schedules correctly: 1 (no read-ahead), 2 (read-ahead waits for the write
// behind), 3 and 4 (full overlap); also one sub-group holding the whole partition.
TEST(NvmeOptimizerBuffers, AnyBufferCountGivesTheSameWeights) {
  Scenario s = cpu_scenario(3, "bf16");
  s.steps = 4;
  const TrainTrace host = train_one_rank(s);
  for (int buffers : {1, 2, 3, 4}) {
    ScratchDir nvme;
    Scenario on_nvme = s;
    on_nvme.nvme_dir = nvme.path();
    on_nvme.nvme_buffers = buffers;
    EXPECT_EQ(compare_exactly(train_one_rank(on_nvme), host), "") << on_nvme.name();
  }
  s.sub_group_numel = 1'000'000'000;
  ScratchDir nvme;
  Scenario whole = s;
  whole.nvme_dir = nvme.path();
  EXPECT_EQ(compare_exactly(train_one_rank(whole), train_one_rank(s)), "") << whole.name();
}

// Saved from NVMe after 5 steps and resumed onto NVMe: the uninterrupted host-state run's last 7
// steps and weights, bit for bit — also with 4 buffers, where every record saved is one the buffers
// kept newer than its file.
TEST(NvmeOptimizerCheckpoint, SaveAndResumeEqualUninterruptedRun) {
  for (auto [stage, buffers] : {std::pair{1, kBuffers}, std::pair{3, kBuffers}, std::pair{3, 4}}) {
    ScratchDir nvme, checkpoint;
    Scenario s = cpu_scenario(stage, "bf16");
    s.nvme_buffers = buffers;
    Scenario on_nvme = s;
    on_nvme.nvme_dir = nvme.path();
    EXPECT_EQ(resume_difference(s, on_nvme, on_nvme, 5, checkpoint.path()), "")
        << "stage " << stage << ", " << buffers << " buffers";
  }
}

// An engine over the test model with its optimizer state on NVMe in `dir`.
struct NvmeEngine {
  std::unique_ptr<Comm> comm = Comm::single(at::Device(at::kCPU));
  std::unique_ptr<FunctionalModel> model = make_causal_lm(test_model_config(true));
  std::unique_ptr<ZeroEngine> engine;

  explicit NvmeEngine(const std::string& dir, int buffer_count = 4)
      : NvmeEngine(std::vector<std::string>{dir}, buffer_count) {}

  explicit NvmeEngine(const std::vector<std::string>& dirs, int buffer_count = 4) {
    ZeroEngineOptions options;
    options.partition.stage = 3;
    options.partition.compute_dtype = at::kBFloat16;
    options.offload_optimizer = true;
    options.cpu_threads = 1;
    options.sub_group_size = kSubGroup;
    options.nvme_optimizer = {
        .paths = dirs, .buffer_count = buffer_count, .pipeline_read = true, .pipeline_write = true, .io = {}};
    engine = std::make_unique<ZeroEngine>(*model, init_parameters(test_model_config(true), 42, at::kFloat, at::kCPU),
                                          options, *comm);
  }

  StepOutcome train_step() {
    at::Tensor ids = at::randint(64, {2, 9}, at::kLong);
    engine->forward_backward(ids.narrow(1, 0, 8), ids.narrow(1, 1, 8), 1.0);
    return engine->step(1e-2, 1.0);
  }

  // The error a training step throws (tierzero::Error), by the time its optimizer step has finished
  // (finish_step: at stage 3 it runs on after step() returns); ok when the step succeeds.
  Status step_error() {
    try {
      train_step();
      engine->finish_step();
    } catch (const Error& error) {
      return error.status();
    }
    return Status();
  }
};

// The engine's stage 3 shard is 17568 elements: 6 sub-groups (5 of 3000, one of 2568).
constexpr int64_t kEngineShard = 17568;

// With a buffer for every sub-group the records never leave the buffers after the first write.
TEST(NvmeOptimizerTraffic, BuffersHoldingEverySubGroupMoveNothing) {
  ScratchDir nvme;
  NvmeEngine e(nvme.path(), 6);
  ASSERT_EQ(e.engine->partitioner().partition_numel(), kEngineShard);
  for (int step = 0; step < 3; ++step) {
    e.train_step();
    e.engine->finish_step();  // the traffic is the last finished step's
    const NvmeTraffic traffic = e.engine->nvme_traffic();
    EXPECT_EQ(traffic.step_read_bytes, 0u) << "step " << step;
    EXPECT_EQ(traffic.step_written_bytes, 0u) << "step " << step;
    EXPECT_GE(traffic.resident_bytes, 3 * sizeof(float) * kEngineShard);
    EXPECT_EQ(traffic.resident_bytes % 4096, 0u);
  }
  EXPECT_NE(e.engine->optimizer().placement().find("nvme"), std::string::npos);
}

// Two buffers over the 6 sub-groups: the first write leaves 4 and 5 in the buffers, so step 1 runs
// back to front, reads 3..0, writes 5..2 and keeps 1 and 0 for step 2, which runs front to back
// (reads 2..5, writes 0..3, keeps 4 and 5). master_params() writes the kept records (not a step's
// traffic) and reads the master part of each record (a range, not counted), leaving no buffer a
// whole record: the next step reads every record, front to back, and writes 0..3 (keeps 4 and 5).
TEST(NvmeOptimizerTraffic, EachStepMovesTheRecordsTheBuffersDoNotHold) {
  ScratchDir nvme;
  NvmeEngine e(nvme.path(), 2);
  ASSERT_EQ(e.engine->partitioner().partition_numel(), kEngineShard);
  const uint64_t full = 3 * sizeof(float) * kSubGroup, last = 3 * sizeof(float) * (kEngineShard - 5 * kSubGroup);
  const std::pair<uint64_t, uint64_t> read_written[] = {
      {4 * full, 3 * full + last}, {3 * full + last, 4 * full}, {4 * full, 3 * full + last}};
  for (const auto& [read, written] : read_written) {
    e.train_step();
    e.engine->finish_step();
    const NvmeTraffic traffic = e.engine->nvme_traffic();
    EXPECT_EQ(traffic.step_read_bytes, read);
    EXPECT_EQ(traffic.step_written_bytes, written);
  }
  e.engine->master_params();  // writes 1 and 0, reads the master parts of 0..5
  e.train_step();
  e.engine->finish_step();
  const NvmeTraffic traffic = e.engine->nvme_traffic();
  EXPECT_EQ(traffic.step_read_bytes, 5 * full + last);
  EXPECT_EQ(traffic.step_written_bytes, 4 * full);
}

// Striped over two paths: each holds a file with its half of every record, and the weights are
// those of one path.
TEST(NvmeOptimizerStriping, TwoPathsGiveTheSameWeights) {
  ScratchDir one, a, b;
  std::map<std::string, at::Tensor> want, got;
  {
    at::manual_seed(7);
    NvmeEngine e(one.path());
    for (int step = 0; step < 3; ++step) e.train_step();
    want = e.engine->master_params();
  }
  at::manual_seed(7);
  NvmeEngine e(std::vector<std::string>{a.path(), b.path()});
  for (int step = 0; step < 3; ++step) e.train_step();
  got = e.engine->master_params();
  for (const auto& [name, param] : want) EXPECT_TRUE(got.at(name).equal(param)) << name;
  const std::string file = "/tierzero-optimizer-r0.swap";
  EXPECT_GT(std::filesystem::file_size(a.path() + file), 0u);  // written up to the last record's part
  EXPECT_GT(std::filesystem::file_size(b.path() + file), 0u);
}

TEST(NvmeOptimizerErrors, UnwritablePathIsNamedWithTheFix) {
  try {
    NvmeEngine e("/proc/tierzero-nvme-test");
    FAIL() << "an engine over /proc was built";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("/proc/tierzero-nvme-test"), std::string::npos) << message;
    EXPECT_NE(message.find("nvme_path"), std::string::npos) << message;
  }
}

TEST(NvmeOptimizerErrors, FullDiskNamesFileOffsetAndBytes) {
  ScratchDir nvme;
  std::atomic<bool> full = false;
  nvme::testing::ScopedFaultInjector faults([&full](const nvme::testing::PieceCompletion& piece, int64_t result) {
    return full && piece.op == nvme::Op::kWrite ? -ENOSPC : result;
  });
  NvmeEngine e(nvme.path());
  e.train_step();
  full = true;
  const Status error = e.step_error();
  EXPECT_ERROR(error, ErrorCode::kOutOfSpace, "NVMe disk full");
  EXPECT_ERROR(error, ErrorCode::kOutOfSpace, nvme.path() + "/tierzero-optimizer-r0.swap");
  EXPECT_ERROR(error, ErrorCode::kOutOfSpace, "offset");
  EXPECT_ERROR(error, ErrorCode::kOutOfSpace, "free");
}

TEST(NvmeOptimizerErrors, FailedReadNamesFileAndOffset) {
  ScratchDir nvme;
  std::atomic<bool> broken = false;
  nvme::testing::ScopedFaultInjector faults([&broken](const nvme::testing::PieceCompletion& piece, int64_t result) {
    return broken && piece.op == nvme::Op::kRead ? -EIO : result;
  });
  NvmeEngine e(nvme.path());
  broken = true;
  // The first write leaves sub-groups 2..5 of 6 (see NvmeEngine) in the 4 buffers: the first step
  // runs back to front from them and reads sub-group 1 first; records are 4096-aligned in the file.
  const Status error = e.step_error();
  const uint64_t record_stride = (3 * sizeof(float) * kSubGroup + 4095) / 4096 * 4096;
  EXPECT_ERROR(error, ErrorCode::kIo, "reading optimizer sub-group 1");
  EXPECT_ERROR(error, ErrorCode::kIo, "offset " + std::to_string(record_stride) + " of " + nvme.path());
}

}  // namespace
}  // namespace tierzero::engine::testing
