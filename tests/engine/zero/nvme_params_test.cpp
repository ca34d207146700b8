// ZeRO-3 parameters homed on NVMe (offload_param.device "nvme", nvme_params.h) against the same run
// with the parameter shard in host memory (offload_param "cpu"): the same losses and master weights
// bit for bit over 8 steps — fp32 and bf16, the optimizer in host memory or on NVMe, read buffers
// smaller than a unit (a gather reads several pieces), records smaller than the shard, some records
// kept in host memory (max_in_cpu), the step that follows into the next forward and the plain one,
// 2 ranks (Gloo), and across a save and resume; on one GPU where there is one. Too few read buffers
// for a unit, a failed read and a full disk are errors naming the key (and the file, the count
// needed). The scratch directory stands in for the drive.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>

#include "engine/zero/zero_engine.h"
#include "nvme/testing/fault_injection.h"
#include "rank_launcher.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

// The test model's stage 3 shard is 9824 elements on one rank: records of 3000 split it in 4.
constexpr int64_t kSubGroup = 3000;

using test_support::ScratchDir;

Scenario host_params(const std::string& dtype) {
  Scenario s;
  s.stage = 3;
  s.offload = true;
  s.offload_params = true;
  s.dtype = dtype;
  s.steps = 8;
  s.sub_group_numel = kSubGroup;
  s.nvme_buffers = 2;
  s.clip = 0.5;
  return s;
}

class NvmeParams : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(NvmeParams, OneRankEqualsHostParamsBitForBit) {
  const auto& [dtype, optimizer_on_nvme] = GetParam();
  ScratchDir params_dir, state_dir;
  Scenario s = host_params(dtype);
  if (optimizer_on_nvme) s.nvme_dir = state_dir.path();
  const TrainTrace host = train_one_rank(s);
  s.nvme_params_dir = params_dir.path();
  EXPECT_EQ(compare_exactly(train_one_rank(s), host), "") << s.name();
}

TEST_P(NvmeParams, PlainStepAndHostRecordsEqualHostParamsBitForBit) {
  const auto& [dtype, optimizer_on_nvme] = GetParam();
  ScratchDir state_dir;
  Scenario s = host_params(dtype);
  s.overlap = false;
  if (optimizer_on_nvme) s.nvme_dir = state_dir.path();
  const TrainTrace host = train_one_rank(s);
  for (int64_t in_cpu : {int64_t{0}, kSubGroup + 1, int64_t{1} << 40}) {  // none, one record, all of them
    ScratchDir params_dir;
    Scenario on_nvme = s;
    on_nvme.nvme_params_dir = params_dir.path();
    on_nvme.max_in_cpu = in_cpu;
    EXPECT_EQ(compare_exactly(train_one_rank(on_nvme), host), "") << on_nvme.name();
  }
}

TEST_P(NvmeParams, TwoRanksEqualHostParamsBitForBit) {
  const auto& [dtype, optimizer_on_nvme] = GetParam();
  ScratchDir params_dir, state_dir;
  Scenario s = host_params(dtype);
  s.world_size = 2;
  s.steps = 4;
  s.nvme_params_dir = params_dir.path();
  if (optimizer_on_nvme) s.nvme_dir = state_dir.path();
  s.compare_nvme = true;
  EXPECT_EQ(run_ranks(s, 0.0, 0.0), "") << s.name();
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NvmeParams, ::testing::Combine(::testing::Values("fp32", "bf16"), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_state_nvme" : "_state_host");
                         });

// Saved after 3 steps and resumed with the parameters on NVMe (the resume writes the loaded master's
// 16-bit copy there): the uninterrupted host-parameter run's last 5 steps and weights, bit for bit.
TEST(NvmeParamsCheckpoint, SaveAndResumeEqualUninterruptedRun) {
  ScratchDir params_dir, checkpoint;
  const Scenario s = host_params("bf16");
  Scenario on_nvme = s;
  on_nvme.nvme_params_dir = params_dir.path();
  EXPECT_EQ(resume_difference(s, on_nvme, on_nvme, 3, checkpoint.path()), "");
}

// A unit whose shard needs more pieces than there are read buffers is refused before anything is
// allocated or written.
TEST(NvmeParamsBuffers, TooFewBuffersForAUnitNameTheKeyAndTheCount) {
  ScratchDir params_dir;
  Scenario s = host_params("bf16");
  s.nvme_params_dir = params_dir.path();
  s.nvme_param_buffers = 2;
  try {
    train_one_rank(s);
    FAIL() << "trained with 2 read buffers of 1024 elements";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("zero_optimization.offload_param.buffer_count is 2"), std::string::npos)
        << e.status().message();
    EXPECT_NE(e.status().message().find("raise offload_param.buffer_count to "), std::string::npos)
        << e.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(params_dir.path() + "/tierzero-params-r0.swap"));  // refused first
}

// The train error of a scenario (tierzero::Error), or ok.
Status train_error(const Scenario& s) {
  try {
    train_one_rank(s);
  } catch (const Error& error) {
    return error.status();
  }
  return Status();
}

// A failed read of the parameter swap file (a gather's piece) and a full disk under the optimizer's
// write of the new weights are errors naming the file, the record, the key and the fix.
TEST(NvmeParamsErrors, FailedReadAndFullDiskNameTheFileAndTheKey) {
  ScratchDir params_dir;
  Scenario s = host_params("bf16");
  s.nvme_params_dir = params_dir.path();
  s.steps = 2;
  const std::string file = params_dir.path() + "/tierzero-params-r0.swap";
  for (const nvme::Op op : {nvme::Op::kRead, nvme::Op::kWrite}) {
    std::atomic<int> writes = 0;  // the shard's first write (4 records) goes through
    nvme::testing::ScopedFaultInjector faults([&](const nvme::testing::PieceCompletion& piece, int64_t result) {
      if (piece.path != file || piece.op != op) return result;
      if (op == nvme::Op::kRead) return int64_t{-EIO};
      return writes++ < 4 ? result : int64_t{-ENOSPC};
    });
    const Status error = train_error(s);
    if (op == nvme::Op::kRead) {
      EXPECT_ERROR(error, ErrorCode::kIo, "reading parameter record ");
      EXPECT_ERROR(error, ErrorCode::kIo, file);
      EXPECT_ERROR(error, ErrorCode::kIo, "zero_optimization.offload_param.nvme_path");
    } else {
      EXPECT_ERROR(error, ErrorCode::kOutOfSpace, "NVMe disk full writing parameter record ");
      EXPECT_ERROR(error, ErrorCode::kOutOfSpace, file);
      EXPECT_ERROR(error, ErrorCode::kOutOfSpace, "zero_optimization.offload_param.nvme_path a directory on a larger drive");
    }
  }
}

// On a GPU: the pieces land through the pinned read buffers and the host-to-device side stream.
TEST(NvmeParamsGpu, OneGpuEqualsHostParamsBitForBit) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) GTEST_SKIP() << "no CUDA device";
  for (const char* dtype : {"fp32", "bf16"}) {
    ScratchDir params_dir, state_dir;
    Scenario s = host_params(dtype);
    s.device = "cuda";
    s.nvme_dir = state_dir.path();
    const TrainTrace host = train_one_rank(s);
    s.nvme_params_dir = params_dir.path();
    EXPECT_EQ(compare_exactly(train_one_rank(s), host), "") << s.name();
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
