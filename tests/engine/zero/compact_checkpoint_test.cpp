// Compact checkpoints: an offloaded optimizer whose state is compact (tierzero.master_weights
// "compact", tierzero.optimizer_state_dtype "int8") saves it as it lives (checkpoint format_version
// 3: the master as bf16 weights + int16 residual, 8-bit moments as codes + block scales), record by
// record, and a resume at the same layout loads it back bit for bit:
//   - compact master + int8 moments, compact master + bf16 moments, and fp32 (saved raw, as before),
//     with the state in host memory and on NVMe (no record in pinned memory, and 2 of 7): saved at
//     step 8 and resumed, the uninterrupted run's last 12 steps and weights bit for bit; the group
//     sections (the rank files' bytes; the tiny model has no replicated tensors, checked) over the
//     parameters: <= 6.1 bytes/param with int8 moments, <= 8.1 with bf16 ones, and what train's
//     preflight plans for the save;
//   - the same-layout resume loads the parts as stored (a non-canonical block, which the decoded
//     path would re-encode, comes back byte for byte);
//   - two ranks: resumed as stored at two ranks and decoded at one, near the fp32 reference;
//   - convert (consolidate_to_safetensors, `tierzero convert`) of the compact checkpoint is the
//     16-bit export (`train --export`) of the same state, and the fp32-master run's convert, byte
//     for byte;
//   - across layouts through the decoded path: a compact checkpoint resumed by an fp32 engine holds
//     the decoded values exactly; an fp32 checkpoint resumed by a compact engine splits the master
//     exactly and re-encodes the moments (its next save stores encode_partition of the fp32 values).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/convert/consolidate.h"
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

using checkpoint::StateCodec;
using test_support::ScratchDir;

// A multiple of cpu_adam::kMomentBlock: the scenarios' stage 3 shard of 9824 elements in 4 sub-groups.
constexpr int64_t kSubGroup = 2560;

struct Layout {
  const char* name;
  const char* master;
  const char* moments;
  double max_bytes_per_param;
};
constexpr Layout kLayouts[] = {{"compact_int8", "compact", "int8", 6.1},
                               {"compact_bf16", "compact", "bf16", 8.1},
                               {"fp32", "fp32", "fp32", 12.1}};

// docs/formats.md's bytes per parameter of one rank's partition of `numel` elements: the master 4
// (fp32, or a compact one's bf16 weights + int16 residual), each moment 4 (fp32), 2 (bf16), or one
// byte of code plus one fp32 scale per 256 elements (int8).
double formats_bytes_per_param(const Layout& layout, uint64_t numel) {
  const std::string moments = layout.moments;
  const uint64_t moment = moments == "int8" ? numel + (numel + 255) / 256 * 4 : numel * (moments == "bf16" ? 2 : 4);
  return static_cast<double>(4 * numel + 2 * moment) / static_cast<double>(numel);
}

// The checkpoint's group sections per parameter: every rank file's bytes (no replicated tensors to
// take out: checked) over the group's logical elements.
double group_bytes_per_param(const checkpoint::CheckpointReader& reader) {
  EXPECT_TRUE(reader.manifest().replicated.empty());
  uint64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(reader.path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank_", 0) == 0 && entry.path().extension() == ".bin") bytes += entry.file_size();
  }
  return static_cast<double>(bytes) / static_cast<double>(reader.manifest().groups.at(0).numel());
}

TEST(CompactCheckpoint, ResumeIsTheUninterruptedRunInItsBytesPerParam) {
  for (const Layout& layout : kLayouts) {
    for (int64_t in_memory : {int64_t{-1}, int64_t{0}, int64_t{2}}) {  // -1: host memory
      ScratchDir nvme, dir;
      Scenario s;
      s.stage = 3;
      s.offload = true;
      s.dtype = "bf16";
      s.steps = 20;
      s.sub_group_numel = kSubGroup;
      s.nvme_buffers = 2;
      s.clip = 0.5;
      s.master = layout.master;
      s.state_dtype = layout.moments;
      if (in_memory >= 0) {
        s.nvme_dir = nvme.path();
        s.records_in_memory = in_memory;
      }
      const std::string what = s.name() + (in_memory >= 0 ? ", records in memory " + std::to_string(in_memory) : "");
      EXPECT_EQ(resume_difference(s, s, s, 8, dir.path()), "") << what;

      ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                           checkpoint::CheckpointReader::open(dir.path()));
      const std::vector<checkpoint::StateSpec>& states = reader->manifest().groups.at(0).states;
      ASSERT_EQ(states.size(), 3u);
      const bool compact = std::string(layout.master) == "compact";
      const bool int8 = std::string(layout.moments) == "int8";
      EXPECT_EQ(states[0].codec, compact ? StateCodec::kCompactMaster : StateCodec::kRaw) << what;
      EXPECT_EQ(states[1].codec, int8 ? StateCodec::kBlockwise8 : StateCodec::kRaw) << what;
      EXPECT_EQ(states[2].codec, int8 ? StateCodec::kBlockwise8 : StateCodec::kRaw) << what;
      const bool bf16 = std::string(layout.moments) == "bf16";
      EXPECT_EQ(states[1].dtype, bf16 ? ElementType::kBF16 : ElementType::kF32) << what;  // encoded: F32
      const double per_param = group_bytes_per_param(*reader);
      std::printf("%s: %.3f bytes/param on disk\n", what.c_str(), per_param);
      EXPECT_LE(per_param, layout.max_bytes_per_param) << what;
      EXPECT_GE(per_param, layout.max_bytes_per_param - 0.2) << what;  // nothing left out
      // docs/formats.md's bytes per parameter, which train's preflight plans (output_preflight_test).
      EXPECT_DOUBLE_EQ(per_param, formats_bytes_per_param(layout, reader->manifest().groups[0].numel())) << what;
    }
  }
}

// Rank 0's stored parts of every state, in the checkpoint's order.
std::vector<std::vector<std::byte>> stored_parts_of(checkpoint::CheckpointReader& reader, int64_t numel) {
  std::vector<std::vector<std::byte>> parts;
  const checkpoint::FlatGroup& group = reader.manifest().groups.at(0);
  for (size_t s = 0; s < group.states.size(); ++s) {
    const std::vector<checkpoint::StatePart> layout = checkpoint::state_parts(group.states[s]);
    for (size_t j = 0; j < layout.size(); ++j) {
      parts.emplace_back(checkpoint::part_numel(layout[j], static_cast<uint64_t>(numel)) *
                         element_bits(layout[j].dtype) / 8);
      EXPECT_OK(reader.read_stored_partition(0, s, j, 0, parts.back()));
    }
  }
  return parts;
}

// A resume at the same layout loads the parts as stored, not their decoded values: a checkpoint whose
// first exp_avg block is zero codes with a scale of 3 (decoded: zeros, which the decoded path would
// re-encode with scale 0) is held as stored, so the engine saves it back byte for byte.
TEST(CompactCheckpoint, SameLayoutResumeLoadsThePartsAsStored) {
  for (bool on_nvme : {false, true}) {
    ScratchDir nvme_a, nvme_b, saved, crafted, again;
    OffloadEngineSpec spec{.stage = 3, .compute = at::kBFloat16, .state = at::kChar,
                           .master = MasterLayout::kCompact, .sub_group = kSubGroup};
    if (on_nvme) spec.nvme_dir = nvme_a.path();
    OffloadEngine a(spec);
    for (int step = 0; step < 3; ++step) a.train_step(step);
    ASSERT_OK(save_engine_checkpoint(saved.path(), *a.engine, CheckpointExtras{.iteration = 3}));
    const int64_t numel = a.engine->partitioner().partition_numel();
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> reader,
                         checkpoint::CheckpointReader::open(saved.path()));
    std::vector<std::vector<std::byte>> parts = stored_parts_of(*reader, numel);
    ASSERT_EQ(parts.size(), 6u);  // hi, residual, exp_avg codes, scales, exp_avg_sq codes, scales
    std::fill(parts[2].begin(), parts[2].begin() + 256, std::byte{0});
    const float three = 3.0f;
    std::memcpy(parts[3].data(), &three, sizeof(three));

    checkpoint::RankData data;
    data.group_states.emplace_back(parts.begin(), parts.end());
    data.rank_state = {{"iteration", 3}};
    ASSERT_OK(checkpoint::save_checkpoint(crafted.path(), "global_step3", reader->manifest(), {&data, 1}));
    if (on_nvme) spec.nvme_dir = nvme_b.path();
    OffloadEngine b(spec);
    ASSERT_OK(load_engine_checkpoint(crafted.path(), *b.engine).status());
    EXPECT_EQ(b.engine->optimizer().step_count(), 3);
    ASSERT_OK(save_engine_checkpoint(again.path(), *b.engine, CheckpointExtras{.iteration = 3}));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> resaved,
                         checkpoint::CheckpointReader::open(again.path()));
    const std::vector<std::vector<std::byte>> got = stored_parts_of(*resaved, numel);
    for (size_t i = 0; i < parts.size(); ++i)
      EXPECT_TRUE(got.at(i) == parts[i]) << "part " << i << (on_nvme ? " (nvme)" : " (host)");
  }
}

// Convert of the compact checkpoint = the export of the same state = convert of the fp32 master's
// (rounded ties away, so the same run bit for bit) checkpoint, byte for byte.
TEST(CompactCheckpoint, ConvertIsTheExportByteForByte) {
  for (bool on_nvme : {false, true}) {
    ScratchDir out, nvme_a, nvme_b;
    std::string model[3];
    for (int compact = 0; compact < 2; ++compact) {
      const std::string nvme_dir = on_nvme ? (compact ? nvme_a.path() : nvme_b.path()) : "";
      OffloadEngine e = trained_master_twin(compact, nvme_dir, kSubGroup, 5);
      const std::string save = out.path() + "/ckpt" + std::to_string(compact);
      const std::string converted = out.path() + "/converted" + std::to_string(compact);
      ASSERT_OK(save_engine_checkpoint(
          save, *e.engine, CheckpointExtras{.iteration = 5, .model_config_json = to_hf_json(e.model->config())}));
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::ConsolidationSource> source,
                           checkpoint::open_engine_checkpoint_source(save));
      checkpoint::ConvertOptions options;
      options.progress = false;
      ASSERT_OK(checkpoint::consolidate_to_safetensors(*source, converted, options).status());
      model[compact] = file_bytes(converted + "/model.safetensors");
      if (compact == 1) {
        const std::string exported = out.path() + "/exported";
        ASSERT_OK(export_16bit_model(*e.engine, to_hf_json(e.model->config()), exported, {.read_piece_bytes = 64}));
        model[2] = file_bytes(exported + "/model.safetensors");
      }
    }
    EXPECT_FALSE(model[1].empty());
    EXPECT_TRUE(model[1] == model[2]) << (on_nvme ? "nvme" : "host") << ": convert of the compact checkpoint";
    EXPECT_TRUE(model[1] == model[0]) << (on_nvme ? "nvme" : "host") << ": convert of the fp32 checkpoint";
  }
}

// Two ranks: saved at two, resumed as stored at two (each rank its own parts) and decoded at one;
// both runs stay within bf16's and the 8-bit moments' distance of the fp32 reference (5 % of the loss,
// 0.1 in a weight; a rank given another rank's parts would not: its weights are another shard's).
TEST(CompactCheckpoint, TwoRanksResumeAsStoredAndAtOneRank) {
  ScratchDir dir;
  Scenario saved;
  saved.stage = 3;
  saved.offload = true;
  saved.world_size = 2;
  saved.dtype = "bf16";
  saved.clip = 0.5;
  saved.steps = 4;
  saved.sub_group_numel = kSubGroup;
  saved.master = "compact";
  saved.state_dtype = "int8";
  saved.round_away = false;
  saved.save_dir = dir.path();
  ASSERT_EQ(run_ranks(saved, 0.05, 0.1), "") << saved.name();
  for (int world : {2, 1}) {
    Scenario resumed = saved;
    resumed.world_size = world;
    resumed.micro_batch = saved.micro_batch * saved.world_size / world;  // the same global batch
    resumed.steps = 8;
    resumed.save_dir.clear();
    resumed.resume_dir = dir.path();
    EXPECT_EQ(run_ranks(resumed, 0.05, 0.1), "") << resumed.name();
  }
}

// State `s` of rank 0's partition decoded to fp32 (what read_partition gives at the saved world size).
at::Tensor decoded(checkpoint::CheckpointReader& reader, int s, int64_t numel) {
  at::Tensor out = at::empty({numel}, at::kFloat);
  EXPECT_OK(reader.read_partition(0, static_cast<size_t>(s), 1, 0,
                                  {static_cast<std::byte*>(out.data_ptr()), static_cast<size_t>(out.nbytes())}));
  return out;
}

TEST(CompactCheckpoint, ResumesAcrossLayoutsThroughTheDecodedValues) {
  for (bool on_nvme : {false, true}) {
    ScratchDir compact_dir, fp32_dir, again_dir, nvme_a, nvme_b, nvme_c, nvme_d;
    const auto nvme = [&](const ScratchDir& d) { return on_nvme ? d.path() : std::string(); };
    const OffloadEngineSpec compact{.stage = 3, .compute = at::kBFloat16, .state = at::kChar,
                                    .master = MasterLayout::kCompact, .sub_group = kSubGroup};
    const OffloadEngineSpec fp32{.stage = 3, .compute = at::kBFloat16, .sub_group = kSubGroup};
    const auto with_nvme = [](OffloadEngineSpec spec, std::string dir) {
      spec.nvme_dir = std::move(dir);
      return spec;
    };
    OffloadEngine saved_compact(with_nvme(compact, nvme(nvme_a))), saved_fp32(with_nvme(fp32, nvme(nvme_b)));
    for (int step = 0; step < 4; ++step) {
      saved_compact.train_step(step);
      saved_fp32.train_step(step);
    }
    ASSERT_OK(save_engine_checkpoint(compact_dir.path(), *saved_compact.engine, CheckpointExtras{.iteration = 4}));
    ASSERT_OK(save_engine_checkpoint(fp32_dir.path(), *saved_fp32.engine, CheckpointExtras{.iteration = 4}));
    const int64_t numel = saved_compact.engine->partitioner().partition_numel();

    // Compact -> fp32: the fp32 engine holds the decoded values exactly.
    OffloadEngine into_fp32(with_nvme(fp32, nvme(nvme_c)));
    ASSERT_OK(load_engine_checkpoint(compact_dir.path(), *into_fp32.engine).status());
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> compact_reader,
                         checkpoint::CheckpointReader::open(compact_dir.path()));
    EXPECT_TRUE(into_fp32.state().master.equal(decoded(*compact_reader, 0, numel)));
    EXPECT_TRUE(into_fp32.state().exp_avg.equal(decoded(*compact_reader, 1, numel)));
    EXPECT_TRUE(into_fp32.state().exp_avg_sq.equal(decoded(*compact_reader, 2, numel)));
    EXPECT_EQ(into_fp32.engine->optimizer().step_count(), 4);
    EXPECT_TRUE(std::isfinite(into_fp32.train_step(4)));

    // Fp32 -> compact: the master split exactly, the moments re-encoded; saved again, the parts are
    // encode_partition of the fp32 checkpoint's values.
    OffloadEngine into_compact(with_nvme(compact, nvme(nvme_d)));
    ASSERT_OK(load_engine_checkpoint(fp32_dir.path(), *into_compact.engine).status());
    ASSERT_OK(save_engine_checkpoint(again_dir.path(), *into_compact.engine, CheckpointExtras{.iteration = 4}));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> fp32_reader,
                         checkpoint::CheckpointReader::open(fp32_dir.path()));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<checkpoint::CheckpointReader> again,
                         checkpoint::CheckpointReader::open(again_dir.path()));
    for (int s = 0; s < 3; ++s) {
      const checkpoint::StateSpec& spec = again->manifest().groups.at(0).states.at(static_cast<size_t>(s));
      ASSERT_NE(spec.codec, StateCodec::kRaw);
      const at::Tensor values = decoded(*fp32_reader, s, numel);
      ASSERT_OK_AND_ASSIGN(std::vector<std::vector<std::byte>> want,
                           checkpoint::encode_partition(spec, {values.const_data_ptr<float>(),
                                                               static_cast<size_t>(numel)}));
      for (size_t part = 0; part < want.size(); ++part) {
        std::vector<std::byte> got(want[part].size());
        ASSERT_OK(again->read_stored_partition(0, static_cast<size_t>(s), part, 0, got));
        EXPECT_TRUE(got == want[part]) << "state " << s << " part " << part << (on_nvme ? " (nvme)" : " (host)");
      }
    }
    EXPECT_TRUE(into_compact.state().master.equal(decoded(*fp32_reader, 0, numel)));
    EXPECT_TRUE(std::isfinite(into_compact.train_step(4)));
  }
}

}  // namespace
}  // namespace tierzero::engine::testing
