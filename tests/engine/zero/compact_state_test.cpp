// The offloaded optimizers' compact state (partition_optimizer.h's CompactState) and the NVMe
// optimizer's placement by budget:
//   compact master (tierzero.master_weights "compact"): bit for bit the fp32-master run whose bf16
//     weights are rounded ties-away (params16_rounding kNearestAway) over 20 steps — stages 1-3, 1 and 2
//     ranks, state in host memory and on NVMe, offloaded parameters — across a save and resume (also
//     from one layout's checkpoint into the other's), and its 16-bit export byte for byte;
//   8-bit moments (tierzero.optimizer_state_dtype "int8"): trains, a save and resume reproduces the
//     uninterrupted run bit for bit (checkpoints hold the codes and scales: compact_checkpoint_test.cpp),
//     decoded moments re-encode to the same codes, the NVMe state equals the host state, and the loss
//     stays near the fp32-moment run's;
//   placement (tierzero.optimizer_records_in_memory): N records in pinned memory give the weights of
//     all on NVMe, the swap files hold and move only the others, and "auto" picks the most the pinned
//     budget holds;
//   and the refusals at construction.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/model/functional_model.h"
#include "engine/zero/zero_engine.h"
#include "offload_engine.h"
#include "rank_launcher.h"
#include "scenario.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::testing {
namespace {

::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);

using test_support::ScratchDir;

// A multiple of cpu_adam::kMomentBlock: the scenarios' stage 3 shard of 9824 elements in 4 sub-groups.
constexpr int64_t kSubGroup = 2560;

Scenario compact_scenario(int stage, bool compact = true) {
  Scenario s;
  s.stage = stage;
  s.offload = true;
  s.dtype = "bf16";
  s.steps = 20;
  s.sub_group_numel = kSubGroup;
  s.nvme_buffers = 2;
  s.clip = 0.5;
  s.master = compact ? "compact" : "fp32";
  s.round_away = !compact;
  return s;
}

class CompactMaster : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(CompactMaster, OneRankEqualsTheFp32MasterBitForBit) {
  ScratchDir nvme;
  Scenario s = compact_scenario(std::get<0>(GetParam()));
  if (std::get<1>(GetParam())) s.nvme_dir = nvme.path();
  const TrainTrace compact = train_one_rank(s);
  Scenario fp32 = compact_scenario(s.stage, false);
  fp32.nvme_dir = s.nvme_dir;
  EXPECT_EQ(compare_exactly(compact, train_one_rank(fp32)), "") << s.name();
}

TEST_P(CompactMaster, TwoRanksEqualTheFp32MasterBitForBit) {
  ScratchDir nvme;
  Scenario s = compact_scenario(std::get<0>(GetParam()));
  if (std::get<1>(GetParam())) s.nvme_dir = nvme.path();
  s.world_size = 2;
  s.compare_fp32_master = true;  // each rank checks against the fp32 run; the reference check is loose
  EXPECT_EQ(run_ranks(s, 1.0, 1.0), "") << s.name();
}

INSTANTIATE_TEST_SUITE_P(Stages, CompactMaster, ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Bool()),
                         [](const auto& info) {
                           return "stage" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_nvme" : "_host");
                         });

// Stage 3 with the parameter shard offloaded to host memory: the master's high half is that shard.
TEST(CompactMasterOffloadedParams, EqualsTheFp32MasterBitForBit) {
  for (bool nvme_state : {false, true}) {
    ScratchDir nvme;
    Scenario s = compact_scenario(3);
    s.offload_params = true;
    if (nvme_state) s.nvme_dir = nvme.path();
    Scenario fp32 = s;
    fp32.master = "fp32";
    fp32.round_away = true;
    EXPECT_EQ(compare_exactly(train_one_rank(s), train_one_rank(fp32)), "") << s.name();
  }
}

// On a GPU the master's bf16 half is the pinned "16-bit weights" the optimizer copies to the device.
TEST(CompactMasterGpu, OneGpuEqualsTheFp32MasterBitForBit) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) GTEST_SKIP() << "no CUDA device";
  for (int stage : {2, 3}) {
    for (bool nvme_state : {false, true}) {
      for (const char* moments : {"fp32", "int8"}) {
        ScratchDir nvme;
        Scenario s = compact_scenario(stage);
        s.device = "cuda";
        s.steps = 8;
        s.state_dtype = moments;
        if (nvme_state) s.nvme_dir = nvme.path();
        Scenario fp32 = s;
        fp32.master = "fp32";
        fp32.round_away = true;
        EXPECT_EQ(compare_exactly(train_one_rank(s), train_one_rank(fp32)), "") << s.name();
      }
    }
  }
}

// Saved after 8 steps and resumed: the uninterrupted run's last 12 steps and weights bit for bit;
// an fp32-master run resumes a compact one's checkpoint (decoded: the master joined) and vice versa.
TEST(CompactMasterCheckpoint, SaveAndResumeEqualTheUninterruptedRun) {
  for (bool on_nvme : {false, true}) {
    for (int stage : {1, 3}) {
      ScratchDir nvme, checkpoint;
      Scenario compact = compact_scenario(stage);
      if (on_nvme) compact.nvme_dir = nvme.path();
      EXPECT_EQ(resume_difference(compact, compact, compact, 8, checkpoint.path()), "") << compact.name();
    }
  }
  for (bool compact_first : {false, true}) {
    ScratchDir checkpoint;
    const Scenario compact = compact_scenario(3), fp32 = compact_scenario(3, false);
    EXPECT_EQ(resume_difference(compact, compact_first ? compact : fp32, compact_first ? fp32 : compact, 8,
                                checkpoint.path()),
              "")
        << (compact_first ? "compact saved, fp32 resumed" : "fp32 saved, compact resumed");
  }
}

// The export (--export, read_master) of a compact master is the fp32 master's, byte for byte.
TEST(CompactMasterExport, EqualsTheFp32MasterExportByteForByte) {
  for (bool on_nvme : {false, true}) {
    ScratchDir out, nvme_a, nvme_b;
    std::string written[2];
    for (int compact = 0; compact < 2; ++compact) {
      const std::string nvme_dir = on_nvme ? (compact ? nvme_a.path() : nvme_b.path()) : "";
      OffloadEngine e = trained_master_twin(compact, nvme_dir, kSubGroup, 5);
      const std::string dir = out.path() + "/model" + std::to_string(compact);
      throw_if_error(export_16bit_model(*e.engine, to_hf_json(e.model->config()), dir, {.read_piece_bytes = 64}));
      written[compact] = file_bytes(dir + "/model.safetensors");
    }
    EXPECT_FALSE(written[0].empty());
    EXPECT_TRUE(written[0] == written[1]) << (on_nvme ? "nvme" : "host");
  }
}

// state() materialises the fp32 master, which may be changed in place: the next step uses it.
TEST(CompactMasterState, StateIsTheFp32MasterReadAndWritten) {
  OffloadEngine compact({.stage = 2, .compute = at::kBFloat16, .master = MasterLayout::kCompact, .sub_group = kSubGroup});
  OffloadEngine fp32({.stage = 2, .compute = at::kBFloat16, .round_away = true, .sub_group = kSubGroup});
  for (int step = 0; step < 3; ++step) {
    EXPECT_EQ(compact.train_step(step), fp32.train_step(step));
    EXPECT_TRUE(at::equal(compact.state().master, fp32.state().master)) << "step " << step;
    EXPECT_TRUE(at::equal(compact.state().exp_avg, fp32.state().exp_avg)) << "step " << step;
  }
  compact.state().master.mul_(0.5);
  fp32.state().master.mul_(0.5);
  compact.engine->sync_compute_params();
  fp32.engine->sync_compute_params();
  EXPECT_EQ(compact.train_step(3), fp32.train_step(3));
  EXPECT_TRUE(at::equal(compact.state().master, fp32.state().master));
  EXPECT_NE(compact.engine->optimizer().state_placement().find("compact master"), std::string::npos)
      << compact.engine->optimizer().state_placement();
}

// ---- 8-bit moments ------------------------------------------------------------------------------

Scenario int8_scenario(int stage) {
  Scenario s = compact_scenario(stage, false);
  s.round_away = false;
  s.state_dtype = "int8";
  return s;
}

// Within 2% of the fp32-moment run's loss at every step of 20 (measured: 0.83% at worst), on the
// scenarios' fresh batches.
TEST(Moments8bit, TrainsNearTheFp32MomentRun) {
  for (int stage : {1, 3}) {
    const Scenario s = int8_scenario(stage);
    const TrainTrace int8 = train_one_rank(s);
    Scenario fp32 = s;
    fp32.state_dtype = "fp32";
    const TrainTrace want = train_one_rank(fp32);
    EXPECT_EQ(compare_traces(int8, want, 0.02, 1.0), "") << s.name();
    double worst = 0.0;
    for (size_t i = 0; i < int8.losses.size(); ++i)
      worst = std::max(worst, std::abs(int8.losses[i] - want.losses[i]) / want.losses[i]);
    std::printf("%s: worst relative loss difference to fp32 moments %.5f\n", s.name().c_str(), worst);
  }
}

// Trained 30 steps on one batch, 8-bit moments fit it as fp32 moments do: the loss falls from 4.1
// to under 0.05 with both (measured: 0.008 with 8-bit moments and a compact master, 0.018 fp32).
TEST(Moments8bit, LossFallsAsWithFp32Moments) {
  for (bool on_nvme : {false, true}) {
    ScratchDir nvme;
    OffloadEngine int8({.stage = 3, .compute = at::kBFloat16, .state = at::kChar,
                        .nvme_dir = on_nvme ? nvme.path() : "", .master = MasterLayout::kCompact,
                        .sub_group = kSubGroup});
    OffloadEngine fp32({.stage = 3, .compute = at::kBFloat16, .sub_group = kSubGroup});
    double first = 0.0, last_int8 = 0.0, last_fp32 = 0.0;
    for (int step = 0; step < 30; ++step) {
      last_int8 = int8.train_step(0);
      last_fp32 = fp32.train_step(0);
      if (step == 0) first = last_int8;
    }
    std::printf("one batch, 30 steps: loss %.4f -> %.4f (8-bit moments, compact master), %.4f (fp32)\n", first,
                last_int8, last_fp32);
    EXPECT_GT(first, 4.0);
    EXPECT_LT(last_int8, 0.05);
    EXPECT_LT(last_fp32, 0.05);
  }
}

// The checkpoint holds the moments' codes and scales (their dtype F32: what they decode to), so the
// resumed run is the uninterrupted one bit for bit.
TEST(Moments8bit, SaveAndResumeEqualTheUninterruptedRun) {
  for (bool on_nvme : {false, true}) {
    for (bool compact : {false, true}) {
      ScratchDir nvme, checkpoint;
      Scenario s = int8_scenario(3);
      if (compact) s.master = "compact";
      if (on_nvme) s.nvme_dir = nvme.path();
      EXPECT_EQ(resume_difference(s, s, s, 8, checkpoint.path()), "") << s.name();
      const std::unique_ptr<checkpoint::CheckpointReader> reader =
          value_or_throw(checkpoint::CheckpointReader::open(checkpoint.path()));
      ASSERT_EQ(reader->manifest().groups[0].states.size(), 3u);
      EXPECT_EQ(reader->manifest().groups[0].states[1].dtype, ElementType::kF32);
      EXPECT_EQ(reader->manifest().groups[0].states[2].dtype, ElementType::kF32);
    }
  }
}

// Re-encoding decoded 8-bit moments gives the codes and scales back: state() decodes them to fp32 and
// the next step encodes those again, which changes nothing against an engine whose state was never read.
TEST(Moments8bit, DecodedMomentsReencodeToTheSameCodes) {
  for (bool on_nvme : {false, true}) {
    ScratchDir a, b;
    const OffloadEngineSpec spec{.stage = 2, .compute = at::kBFloat16, .state = at::kChar, .sub_group = kSubGroup};
    OffloadEngineSpec spec_a = spec, spec_b = spec;
    if (on_nvme) {
      spec_a.nvme_dir = a.path();
      spec_b.nvme_dir = b.path();
    }
    OffloadEngine read(spec_a), untouched(spec_b);
    for (int step = 0; step < 12; ++step) {
      EXPECT_EQ(read.train_step(step), untouched.train_step(step)) << "step " << step;
      EXPECT_EQ(read.state().exp_avg.scalar_type(), at::kFloat);  // decoded; encoded again by the next step
    }
    const auto want = untouched.engine->master_params();
    const auto got = read.engine->master_params();
    for (const auto& [name, param] : want) EXPECT_TRUE(got.at(name).equal(param)) << name;
  }
}

TEST(Moments8bit, NvmeStateEqualsHostStateBitForBit) {
  for (bool compact : {false, true}) {
    ScratchDir nvme;
    Scenario s = int8_scenario(3);
    if (compact) s.master = "compact";
    const TrainTrace host = train_one_rank(s);
    s.nvme_dir = nvme.path();
    EXPECT_EQ(compare_exactly(train_one_rank(s), host), "") << s.name();
  }
}

// 8-bit moments and a compact master together, two ranks: the fp32 master's run bit for bit.
TEST(Moments8bit, TwoRanksCompactEqualsFp32Master) {
  for (bool on_nvme : {false, true}) {
    ScratchDir nvme;
    Scenario s = compact_scenario(2);
    s.state_dtype = "int8";
    s.world_size = 2;
    s.compare_fp32_master = true;
    if (on_nvme) s.nvme_dir = nvme.path();
    EXPECT_EQ(run_ranks(s, 1.0, 1.0), "") << s.name();
  }
}

// bf16 host gradients (offload_grad_dtype): the optimizers step from them — the smallest state
// trains on one batch, and its NVMe state equals its host state bit for bit.
TEST(Bf16HostGradients, TheCompactStateTrainsOnThem) {
  ScratchDir nvme;
  const OffloadEngineSpec spec{.stage = 3, .compute = at::kBFloat16, .state = at::kChar,
                               .master = MasterLayout::kCompact, .sub_group = kSubGroup, .grads = at::kBFloat16};
  OffloadEngine host(spec);
  OffloadEngineSpec on_nvme = spec;
  on_nvme.nvme_dir = nvme.path();
  OffloadEngine nvme_engine(on_nvme);
  ASSERT_EQ(host.engine->partitioner().grad_partition().scalar_type(), at::kBFloat16);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 30; ++step) {
    last = host.train_step(0);
    EXPECT_EQ(nvme_engine.train_step(0), last) << "step " << step;
    if (step == 0) first = last;
  }
  std::printf("bf16 host gradients, one batch, 30 steps: loss %.4f -> %.4f\n", first, last);
  EXPECT_LT(last, 0.05);
  const auto want = host.engine->master_params();
  const auto got = nvme_engine.engine->master_params();
  for (const auto& [name, param] : want) EXPECT_TRUE(got.at(name).equal(param)) << name;
}

// ---- Placement by budget ------------------------------------------------------------------------

TEST(Placement, RecordsInMemoryGiveTheWeightsOfAllOnNvme) {
  for (const char* layout : {"fp32", "compact_int8"}) {
    ScratchDir a, b;
    Scenario s = compact_scenario(3, std::string(layout) != "fp32");
    s.round_away = false;
    if (std::string(layout) != "fp32") s.state_dtype = "int8";
    s.nvme_dir = a.path();
    const TrainTrace all_on_nvme = train_one_rank(s);
    for (int64_t n : {1, 2, 4}) {  // of 4 sub-groups
      Scenario placed = s;
      placed.nvme_dir = b.path();
      placed.records_in_memory = n;
      EXPECT_EQ(compare_exactly(train_one_rank(placed), all_on_nvme), "") << placed.name();
    }
  }
}

// Saved and resumed with records in memory (the save reads them from the pinned block, the load
// fills it): the uninterrupted run bit for bit, and the checkpoint resumes with none in memory too.
TEST(Placement, SaveAndResumeWithRecordsInMemory) {
  for (bool compact_int8 : {false, true}) {
    ScratchDir nvme, checkpoint, other;
    Scenario s = compact_scenario(3, compact_int8);
    s.round_away = false;
    if (compact_int8) s.state_dtype = "int8";
    s.nvme_dir = nvme.path();
    s.records_in_memory = 2;
    EXPECT_EQ(resume_difference(s, s, s, 8, checkpoint.path()), "") << s.name();
    Scenario none = s;
    none.records_in_memory = 0;
    EXPECT_EQ(resume_difference(s, s, none, 8, other.path()), "") << s.name() << " resumed with none in memory";
  }
}

// The OffloadEngine's stage 3 shard is 17568 elements: 7 sub-groups of 2560 (the last 2208), 3 buffers.
constexpr int64_t kEngineShard = 17568;
constexpr int64_t kEngineGroups = 7;

TEST(Placement, SwapFilesHoldAndMoveOnlyTheStreamedRecords) {
  const uint64_t full = 3 * sizeof(float) * kSubGroup, last = 3 * sizeof(float) * (kEngineShard - 6 * kSubGroup);
  const uint64_t stride = (full + 4095) / 4096 * 4096;
  for (int64_t n : {int64_t{0}, int64_t{2}, int64_t{4}, kEngineGroups}) {
    ScratchDir nvme;
    OffloadEngine e({.stage = 3, .nvme_dir = nvme.path(), .sub_group = kSubGroup, .records_in_memory = n});
    ASSERT_EQ(e.engine->partitioner().partition_numel(), kEngineShard);
    EXPECT_EQ(e.engine->nvme_traffic().resident_bytes, static_cast<uint64_t>(kEngineGroups - n) * stride) << n;
    const std::string file = nvme.path() + "/tierzero-optimizer-r0.swap";
    EXPECT_EQ(std::filesystem::exists(file), n < kEngineGroups) << n;
    const std::string placement = e.engine->optimizer().state_placement();
    EXPECT_EQ(placement.rfind(std::to_string(n) + " of 7 sub-group records in pinned memory", 0), 0u) << placement;
    // Streamed: records n..6 (the last the short one); the buffers keep 3 between passes, so a
    // step moves the other (7 - n - 3) each way, and none of the records in memory.
    const int64_t streamed = kEngineGroups - n, moved = std::max<int64_t>(0, streamed - 3);
    for (int step = 0; step < 4; ++step) {
      e.train_step(step);
      e.engine->finish_step();
      const NvmeTraffic traffic = e.engine->nvme_traffic();
      EXPECT_LE(traffic.step_read_bytes, static_cast<uint64_t>(moved) * full) << n << " step " << step;
      EXPECT_GE(traffic.step_read_bytes, moved == 0 ? 0 : (moved - 1) * full + last) << n << " step " << step;
      EXPECT_LE(traffic.step_written_bytes, static_cast<uint64_t>(moved) * full) << n << " step " << step;
      EXPECT_GE(traffic.step_written_bytes, moved == 0 ? 0 : (moved - 1) * full + last) << n << " step " << step;
    }
  }
}

// The number of records "auto" keeps is the largest that a fixed count could keep under the limit:
// one more fails the pinned budget.
TEST(Placement, ByBudgetPicksTheMostThePinnedLimitHolds) {
  ScratchDir nvme;
  int checked = 0;
  // Limits from below what the other pinned buffers take up to past every record, 24 KiB apart (a
  // record is 30 KiB): each limit "auto" builds under keeps n records where n + 1 fail the budget.
  for (uint64_t limit = 64 << 10; limit < (2 << 20) && checked < 4; limit += 24 << 10) {
    std::unique_ptr<OffloadEngine> e;
    try {
      e = std::make_unique<OffloadEngine>(OffloadEngineSpec{.stage = 3,
                                                            .nvme_dir = nvme.path(),
                                                            .sub_group = kSubGroup,
                                                            .records_in_memory = kRecordsByBudget,
                                                            .pinned_limit = limit});
    } catch (const Error& error) {  // the other buffers alone exceed it
      EXPECT_EQ(error.status().code(), ErrorCode::kOutOfSpace) << error.what();
      continue;
    }
    const std::string placement = e->engine->optimizer().state_placement();
    const int64_t n = std::stoll(placement.substr(0, placement.find(' ')));
    e.reset();
    if (n == 0 || n == kEngineGroups) continue;
    ++checked;
    OffloadEngine fixed({.stage = 3, .nvme_dir = nvme.path(), .sub_group = kSubGroup, .records_in_memory = n,
                         .pinned_limit = limit});
    fixed.train_step(0);
    try {
      OffloadEngine more({.stage = 3, .nvme_dir = nvme.path(), .sub_group = kSubGroup, .records_in_memory = n + 1,
                          .pinned_limit = limit});
      ADD_FAILURE() << n + 1 << " records fit " << limit << " bytes, auto chose " << n;
    } catch (const Error& error) {
      EXPECT_EQ(error.status().code(), ErrorCode::kOutOfSpace) << error.what();
      EXPECT_NE(std::string(error.what()).find("optimizer records kept in pinned memory"), std::string::npos);
    }
    std::printf("limit %llu: %s\n", static_cast<unsigned long long>(limit), placement.c_str());
  }
  EXPECT_GE(checked, 2);
}

// ---- Refusals -----------------------------------------------------------------------------------

std::string construction_error(const Scenario& s) {
  try {
    train_one_rank(s);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(CompactStateErrors, UnsupportedCombinationsAreRefusedNamingTheKey) {
  ScratchDir nvme;
  Scenario s = compact_scenario(2);
  s.steps = 1;
  Scenario device = s;
  device.offload = false;
  EXPECT_NE(construction_error(device).find("tierzero.master_weights \"compact\" needs zero_optimization.offload_optimizer"),
            std::string::npos);
  Scenario fp16 = s;
  fp16.dtype = "fp16";
  EXPECT_NE(construction_error(fp16).find("tierzero.master_weights \"compact\" needs bf16"), std::string::npos);
  Scenario fp32 = s;
  fp32.dtype = "fp32";
  EXPECT_NE(construction_error(fp32).find("tierzero.master_weights"), std::string::npos);
  Scenario params_nvme = compact_scenario(3);
  params_nvme.offload_params = true;
  params_nvme.nvme_params_dir = nvme.path();
  EXPECT_NE(construction_error(params_nvme).find("offload_param.device \"nvme\" is not supported"), std::string::npos);
  Scenario int8_device = int8_scenario(2);
  int8_device.offload = false;
  EXPECT_NE(construction_error(int8_device).find("tierzero.optimizer_state_dtype \"int8\" needs"), std::string::npos);
  Scenario odd_group = int8_scenario(2);
  odd_group.sub_group_numel = 3000;
  EXPECT_NE(construction_error(odd_group).find("sub_group_size=3000 must be a multiple of 256"), std::string::npos);
  Scenario records_host = compact_scenario(2);
  records_host.records_in_memory = 2;
  EXPECT_NE(construction_error(records_host).find("tierzero.optimizer_records_in_memory needs"), std::string::npos);
  Scenario by_budget = compact_scenario(2);
  by_budget.nvme_dir = nvme.path();
  by_budget.records_in_memory = kRecordsByBudget;
  EXPECT_NE(construction_error(by_budget).find("tierzero.pinned_memory_limit, which is not set"), std::string::npos);
  Scenario away_fp16 = compact_scenario(2, false);
  away_fp16.dtype = "fp16";
  EXPECT_NE(construction_error(away_fp16).find("params16_rounding"), std::string::npos);
}

}  // namespace
}  // namespace tierzero::engine::testing
