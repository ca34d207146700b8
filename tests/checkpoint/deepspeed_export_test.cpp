// The way back: PickleWriter's opcodes read back by the inert reader, and export_deepspeed_checkpoint
// read back by the DeepSpeed readers (every state of every parameter, at stages 1-3 and world sizes
// 1-3, scalars, the tied head). That DeepSpeed itself resumes from the output:
// tests/engine/train/deepspeed_migration.py --to-deepspeed.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/deepspeed_export/deepspeed_export.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/torch_format/torch_file.h"
#include "checkpoint/torch_writer/torch_writer.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

TEST(PickleWriter, ValuesReadBackByTheInertReader) {
  test_support::ScratchDir dir("tierzero-pickle-writer");
  const int64_t ints[] = {0,
                          255,
                          256,
                          65535,
                          65536,
                          -1,
                          std::numeric_limits<int32_t>::min(),
                          std::numeric_limits<int32_t>::max(),
                          int64_t{1} << 40,
                          -(int64_t{1} << 40),
                          std::numeric_limits<int64_t>::min()};
  PickleWriter p;
  p.begin_dict();
  p.string("ints");
  p.begin_list();
  for (int64_t v : ints) p.integer(v);
  p.end_list();
  p.string("mixed");
  p.begin_tuple();
  p.real(-2.5);
  p.boolean(true);
  p.none();
  p.string("ü");
  p.end_tuple();
  p.string("json");
  p.json(nlohmann::json{{"a", {1, 2.0, "x", nullptr}}});
  p.string("object");
  p.global("deepspeed.runtime.zero.config", "ZeroStageEnum");
  p.begin_tuple();
  p.integer(3);
  p.end_tuple();
  p.reduce();
  p.end_dict();
  const std::string bytes = p.finish();
  const std::string path = dir.path() + "/value.pkl";
  std::ofstream(path, std::ios::binary) << bytes;

  ASSERT_OK_AND_ASSIGN(PickleDocument doc, read_pickle_file(path, 1 << 20));
  const PyValue& root = doc.root();
  const PyValue* list = root.get("ints");
  ASSERT_NE(list, nullptr);
  ASSERT_EQ(list->items.size(), std::size(ints));
  for (size_t i = 0; i < std::size(ints); ++i) EXPECT_EQ(list->items[i]->integer, ints[i]) << i;
  const PyValue* mixed = root.get("mixed");
  ASSERT_EQ(mixed->items.size(), 4u);
  EXPECT_EQ(mixed->items[0]->real, -2.5);
  EXPECT_TRUE(mixed->items[1]->boolean);
  EXPECT_EQ(mixed->items[2]->kind, PyKind::kNone);
  EXPECT_EQ(mixed->items[3]->text, "ü");
  EXPECT_EQ(root.get("json")->get("a")->items[2]->text, "x");
  const PyValue* object = root.get("object");
  EXPECT_TRUE(object->is_global("deepspeed.runtime.zero.config", "ZeroStageEnum"));
  EXPECT_EQ(object->args->items[0]->integer, 3);
}

TEST(TorchSaveWriter, TensorsReadBackThroughTheZip) {
  test_support::ScratchDir dir("tierzero-torch-writer");
  TorchSaveWriter w("archive");
  const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  w.pickle().begin_dict();
  w.pickle().string("t");
  ASSERT_OK(w.tensor(ElementType::kF32, {2, 3}, std::as_bytes(std::span(values))));
  w.pickle().end_dict();
  EXPECT_ERROR(w.tensor(ElementType::kF32, {4}, std::as_bytes(std::span(values))), ErrorCode::kInvalidArgument,
               "given 24 bytes");
  ASSERT_OK(w.write(dir.path() + "/t.pt"));
  ASSERT_OK_AND_ASSIGN(TorchFile f, TorchFile::open(dir.path() + "/t.pt"));
  ASSERT_OK_AND_ASSIGN(TorchTensor t, f.tensor(*f.root().get("t"), "t"));
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> back(6);
  ASSERT_OK(f.read_fp32(t, 0, back));
  EXPECT_EQ(back, values);
}

// An engine checkpoint of the fixture's tiny tied Llama (one group, no buffers), saved at world 2.
struct SavedEngineCheckpoint {
  CheckpointManifest manifest;
  std::unique_ptr<testing::FixtureData> data;
};

SavedEngineCheckpoint save_fixture(const std::string& dir, int stage) {
  SavedEngineCheckpoint s;
  s.manifest = testing::tiny_llama_manifest(stage, 2);
  s.manifest.groups.resize(1);
  s.manifest.replicated.clear();
  s.manifest.aliases.clear();
  s.manifest.model_config_json = testing::tiny_llama_config();
  s.manifest.loss_scaler = {
      {"cur_scale", 1024.0}, {"cur_iter", 40}, {"last_overflow_iter", 7}, {"cur_hysteresis", 1}, {"dynamic", true}};
  s.data = std::make_unique<testing::FixtureData>(s.manifest);
  const auto ranks = s.data->ranks();
  EXPECT_OK(save_checkpoint(dir, "global_step1234", s.manifest, ranks));
  return s;
}

class DeepSpeedExport : public ::testing::TestWithParam<int> {};

TEST_P(DeepSpeedExport, ReadsBackAsTheSavedStatesAtEveryWorldSize) {
  test_support::ScratchDir dir("tierzero-ds-export");
  const int stage = GetParam();
  const SavedEngineCheckpoint saved = save_fixture(dir.path() + "/engine", stage);
  for (uint32_t world : {1u, 2u, 3u}) {
    const std::string out = dir.path() + "/ds" + std::to_string(world);
    DeepSpeedExportOptions options;
    options.world_size = world;
    options.dtype = ElementType::kF16;
    ASSERT_OK_AND_ASSIGN(DeepSpeedExportReport report,
                         export_deepspeed_checkpoint(dir.path() + "/engine", "", out, options));
    EXPECT_EQ(report.tag, "global_step1234");
    EXPECT_EQ(report.files, world + (stage == 3 ? world : 1));

    const auto& params = saved.manifest.groups[0].params;
    ASSERT_OK_AND_ASSIGN(auto reader, open_deepspeed_resume_reader(out, "", params));
    const CheckpointManifest& m = reader->manifest();
    EXPECT_EQ(m.zero_stage, stage);
    EXPECT_EQ(m.world_size, world);
    EXPECT_EQ(m.step, saved.manifest.step);
    EXPECT_EQ(m.lr_scheduler, saved.manifest.lr_scheduler);
    EXPECT_EQ(m.loss_scaler, saved.manifest.loss_scaler);
    EXPECT_EQ(reader->rank_state(0).value("iteration", -1), saved.manifest.step);
    for (size_t s = 0; s < 3; ++s) {
      std::vector<float> flat(m.groups[0].numel());
      ASSERT_OK(reader->read_flat_range(0, s, 0, std::as_writable_bytes(std::span(flat))));
      EXPECT_EQ(flat, saved.data->logical(0, s)) << "state " << s << " world " << world;
    }
    // Consolidation sees the tied head as DeepSpeed records it.
    ASSERT_OK_AND_ASSIGN(auto source, open_deepspeed_checkpoint(out, ""));
    ASSERT_EQ(source->aliases().size(), 1u);
    EXPECT_EQ(source->aliases()[0].first, "lm_head.weight");
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, DeepSpeedExport, ::testing::Values(1, 2, 3));

TEST(DeepSpeedExportErrors, RefusesWhatDeepSpeedsLayoutCannotHold) {
  test_support::ScratchDir dir("tierzero-ds-export-errors");
  save_fixture(dir.path() + "/engine", 2);
  DeepSpeedExportOptions options;
  std::filesystem::create_directories(dir.path() + "/full");
  std::ofstream(dir.path() + "/full/x") << "x";
  EXPECT_ERROR(export_deepspeed_checkpoint(dir.path() + "/engine", "", dir.path() + "/full", options).status(),
               ErrorCode::kInvalidArgument, "not empty");
  options.dtype = ElementType::kI32;
  EXPECT_ERROR(export_deepspeed_checkpoint(dir.path() + "/engine", "", dir.path() + "/o1", options).status(),
               ErrorCode::kInvalidArgument, "bf16, fp16 or fp32");
  options.dtype = ElementType::kBF16;

  CheckpointManifest odd = testing::tiny_llama_manifest(3, 1);
  odd.groups.erase(odd.groups.begin());  // the fixture's second group: names outside the Llama family
  odd.groups[0].states.push_back({"exp_avg_sq", ElementType::kF32});
  odd.replicated.clear();
  odd.aliases.clear();
  testing::FixtureData data(odd);
  ASSERT_OK(save_checkpoint(dir.path() + "/odd", "t", odd, data.ranks()));
  EXPECT_ERROR(export_deepspeed_checkpoint(dir.path() + "/odd", "", dir.path() + "/o2", options).status(),
               ErrorCode::kUnsupported, "parameter 'extra.a'");

  CheckpointManifest stage0 = testing::tiny_llama_manifest(0, 1);
  stage0.groups.resize(1);
  testing::FixtureData data0(stage0);
  ASSERT_OK(save_checkpoint(dir.path() + "/s0", "t", stage0, data0.ranks()));
  EXPECT_ERROR(export_deepspeed_checkpoint(dir.path() + "/s0", "", dir.path() + "/o3", options).status(),
               ErrorCode::kUnsupported, "stage 0");
}

}  // namespace
}  // namespace tierzero::checkpoint
