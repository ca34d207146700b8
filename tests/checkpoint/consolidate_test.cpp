// tierzero checkpoints -> Hugging Face safetensors: values, sharding, index, config, aliases, and
// nothing left in OUT when anything fails. Python interop when the interpreter has the modules.
#include "checkpoint/convert/consolidate.h"

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <filesystem>
#include <span>

#include <nlohmann/json.hpp>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/safetensors/safetensors.h"
#include "checkpoint_fixture.h"
#include "test_util.h"
#include "tests/common/float16_reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::FixtureData;
using testing::ScratchDir;

// The seed of each consolidated tensor of the tiny Llama fixture, in output order.
nlohmann::json expected_spec(const CheckpointManifest& m) {
  nlohmann::json tensors = nlohmann::json::object();
  for (size_t i = 0; i < m.replicated.size(); ++i) {
    tensors[m.replicated[i].spec.name] = {{"seed", 1000 + i}, {"shape", m.replicated[i].spec.shape}};
  }
  size_t p = 0;
  for (const FlatGroup& g : m.groups) {
    for (const TensorSpec& t : g.params) tensors[t.name] = {{"seed", FixtureData::seed(p++, 0)}, {"shape", t.shape}};
  }
  nlohmann::json tied = nlohmann::json::object();
  for (const auto& [alias, source] : m.aliases) tied[alias] = source;
  return {{"tensors", tensors}, {"tied", tied}};
}

class Consolidate : public ::testing::Test {
 protected:
  void SetUp() override {
    manifest_ = testing::tiny_llama_manifest(3, 3);
    data_ = std::make_unique<FixtureData>(manifest_);
    CheckpointOptions options;
    options.compression_level = 1;
    ASSERT_OK(save_checkpoint(dir_.file("ckpt"), "global_step1234", manifest_, data_->ranks(), options));
    options_.progress = false;
    options_.max_shard_bytes = 600;
    options_.write_buffer_bytes = 4096;
  }

  Result<ConvertReport> convert(const std::string& out) {
    TZ_ASSIGN_OR_RETURN(auto source, open_engine_checkpoint_source(dir_.file("ckpt")));
    return consolidate_to_safetensors(*source, out, options_);
  }

  // Every tensor `index` maps is in its file as BF16 of the fixture's values, bit for bit.
  void expect_bf16_values(const std::string& out, const nlohmann::json& index) {
    const nlohmann::json spec = expected_spec(manifest_);
    EXPECT_EQ(index["weight_map"].size(), spec["tensors"].size());
    for (const auto& [name, file_name] : index["weight_map"].items()) {
      auto file = SafetensorsFile::open(out + "/" + file_name.get<std::string>());
      ASSERT_OK(file);
      const SafetensorsTensorInfo* info = (*file)->find(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(info->dtype, ElementType::kBF16);
      EXPECT_EQ(info->shape, spec["tensors"][name]["shape"].get<std::vector<int64_t>>());
      auto bytes = (*file)->data(*info);
      const uint64_t seed = spec["tensors"][name]["seed"];
      for (size_t j = 0; j < bytes.size() / 2; ++j) {
        uint16_t v;
        std::memcpy(&v, bytes.data() + 2 * j, 2);
        ASSERT_EQ(v, reference::float_to_bf16_bits(testing::fixture_value(seed, j))) << name << "[" << j << "]";
      }
    }
  }

  ScratchDir dir_;
  CheckpointManifest manifest_;
  std::unique_ptr<FixtureData> data_;
  ConvertOptions options_;
};

TEST_F(Consolidate, WritesShardedBf16WithIndexAndConfig) {
  const std::string out = dir_.file("hf");
  auto report = convert(out);
  ASSERT_OK(report);
  EXPECT_GT(report->files, 2u);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  // config.json: the checkpoint's keys in their order, the dtype key naming what the files hold.
  auto config = nlohmann::ordered_json::parse(testing::read_text(out + "/config.json"));
  EXPECT_EQ(config, nlohmann::ordered_json::parse(testing::tiny_llama_config()));  // which says bfloat16
  auto index = nlohmann::json::parse(testing::read_text(out + "/model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], report->tensor_bytes);
  EXPECT_FALSE(index["weight_map"].contains("lm_head.weight"));  // the alias is written once, as its source

  expect_bf16_values(out, index);
}

// A read-ahead ring smaller than two pieces (or than one: it grows to a piece) wraps and waits for
// the writer many times, and tensors read in pieces smaller than a rank's share (zstd sections
// here) are read range by range; every value still arrives where it belongs.
TEST_F(Consolidate, ReadAheadRingAndPiecesOfAnySizeKeepEveryValue) {
  for (uint64_t budget : {uint64_t{1}, uint64_t{1000}, uint64_t{1} << 20}) {
    for (uint64_t piece : {uint64_t{64}, uint64_t{448}, uint64_t{16} << 20}) {
      options_.read_ahead_bytes = budget;
      options_.read_piece_bytes = piece;
      const std::string out = dir_.file("ring_" + std::to_string(budget) + "_" + std::to_string(piece));
      auto report = convert(out);
      ASSERT_OK(report);
      expect_bf16_values(out, nlohmann::json::parse(testing::read_text(out + "/model.safetensors.index.json")));
    }
  }
}

TEST_F(Consolidate, WritesFp32AndFp16OnRequest) {
  for (ElementType dtype : {ElementType::kF32, ElementType::kF16}) {
    options_.dtype = dtype;
    options_.max_shard_bytes = 5'000'000'000;
    const std::string out = dir_.file(std::string("out_") + std::string(dtype_name(dtype)));
    ASSERT_OK(convert(out));
    auto file = SafetensorsFile::open(out + "/model.safetensors");
    ASSERT_OK(file);
    const SafetensorsTensorInfo* norm = (*file)->find("model.norm.weight");
    ASSERT_NE(norm, nullptr);
    EXPECT_EQ(norm->dtype, dtype);
    const float want = testing::fixture_value(FixtureData::seed(10, 0), 3);
    auto bytes = (*file)->data(*norm);
    if (dtype == ElementType::kF32) {
      float v;
      std::memcpy(&v, bytes.data() + 12, 4);
      EXPECT_EQ(v, want);
    } else {
      uint16_t v;
      std::memcpy(&v, bytes.data() + 6, 2);
      EXPECT_EQ(v, reference::float_to_f16_bits(want));
    }
  }
}

TEST_F(Consolidate, AFailureLeavesNothingInOut) {
  // Damage rank 1's file: its zstd data no longer decodes to what the manifest recorded.
  const std::string rank1 = dir_.file("ckpt/global_step1234/rank_00001.bin");
  auto bytes = testing::read_file(rank1);
  bytes[0] ^= 0xff;
  testing::write_file(rank1, bytes);
  const std::string out = dir_.file("hf_bad");
  auto report = convert(out);
  EXPECT_ERROR(report, ErrorCode::kCorrupt, "rank_00001.bin");
  EXPECT_ERROR(report, ErrorCode::kCorrupt, "zstd frame damaged");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".partial"));
}

TEST_F(Consolidate, TakesConfigJsonFromTheCheckpointDirectoryWhenTheManifestHasNone) {
  CheckpointManifest bare = manifest_;
  bare.model_config_json.clear();
  FixtureData data(bare);
  ASSERT_OK(save_checkpoint(dir_.file("bare"), "t", bare, data.ranks()));
  testing::write_text(dir_.file("bare/config.json"), "{\"model_type\": \"llama\"}");
  auto source = open_engine_checkpoint_source(dir_.file("bare"));
  ASSERT_OK(source);
  EXPECT_EQ((*source)->model_config_json(), "{\"model_type\": \"llama\"}");
}

TEST_F(Consolidate, RefusesANonEmptyOutput) {
  const std::string out = dir_.file("busy");
  fs::create_directories(out);
  testing::write_text(out + "/keep.txt", "mine");
  EXPECT_ERROR(convert(out), ErrorCode::kInvalidArgument, "exists and is not an empty directory");
  EXPECT_EQ(testing::read_text(out + "/keep.txt"), "mine");
}

TEST_F(Consolidate, LoadsInPythonSafetensorsAndTransformers) {
  std::vector<std::string> args = {dir_.file("spec.json")};
  for (const char* dtype : {"bf16", "fp16"}) {
    options_.dtype = parse_output_dtype(dtype).value();
    const std::string out = dir_.file(std::string("py_") + dtype);
    ASSERT_OK(convert(out));
    args.push_back(out + ":" + dtype);
  }
  testing::write_text(dir_.file("spec.json"), expected_spec(manifest_).dump());
  const test_support::PythonRun run =
      testing::run_python(testing::source_file("check_converted.py"), args, dir_.file("check_converted.log"));
  if (run.exit_code == test_support::kPythonSkip) {
    GTEST_SKIP() << testing::python() << " lacks torch or safetensors (set TIERZERO_PYTHON): " << run.output;
  }
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("safetensors: "), std::string::npos) << run.output;
  std::printf("%s", run.output.c_str());
}

// Integer and bool tensors (an engine checkpoint stores them as replicated tensors) come out with
// their dtype and bytes; a 3-byte bool tensor puts every later bf16 element at an odd offset, so
// elements straddle the 4 KiB write buffers' ends.
TEST(ConsolidateIntegers, EngineCheckpointKeepsIntegerTensorsAndRoundsFloats) {
  CheckpointManifest m = testing::tiny_llama_manifest(2, 2);
  m.replicated.push_back({{"model.mask", {3}}, ElementType::kBool});
  m.replicated.push_back({{"model.position_ids", {1, 5}}, ElementType::kI64});
  FixtureData data(m);
  std::vector<RankData> ranks = data.ranks();
  const std::vector<uint8_t> mask{1, 0, 1};
  const std::vector<int64_t> ids{0, 1, -3, (int64_t{1} << 40) + 1, INT64_MAX};  // not exact in fp32
  const size_t n = m.replicated.size();
  ranks[0].replicated[n - 2] = std::as_bytes(std::span(mask));
  ranks[0].replicated[n - 1] = std::as_bytes(std::span(ids));
  ScratchDir dir;
  ASSERT_OK(save_checkpoint(dir.file("ckpt"), "t", m, ranks));
  auto source = open_engine_checkpoint_source(dir.file("ckpt"));
  ASSERT_OK(source);
  ConvertOptions options;
  options.progress = false;
  options.write_buffer_bytes = 4096;
  auto report = consolidate_to_safetensors(**source, dir.file("hf"), options);
  ASSERT_OK(report);

  auto file = SafetensorsFile::open(dir.file("hf/model.safetensors"));
  ASSERT_OK(file);
  const SafetensorsTensorInfo* mask_info = (*file)->find("model.mask");
  const SafetensorsTensorInfo* ids_info = (*file)->find("model.position_ids");
  ASSERT_TRUE(mask_info != nullptr && ids_info != nullptr);
  EXPECT_EQ(mask_info->dtype, ElementType::kBool);
  EXPECT_EQ(ids_info->dtype, ElementType::kI64);
  EXPECT_EQ(ids_info->shape, (std::vector<int64_t>{1, 5}));
  const auto mask_bytes = (*file)->data(*mask_info);
  const auto ids_bytes = (*file)->data(*ids_info);
  ASSERT_EQ(mask_bytes.size(), 3u);
  ASSERT_EQ(ids_bytes.size(), ids.size() * 8);
  EXPECT_EQ(0, std::memcmp(mask_bytes.data(), mask.data(), 3));
  EXPECT_EQ(0, std::memcmp(ids_bytes.data(), ids.data(), ids_bytes.size()));
  size_t p = 0;
  for (const TensorSpec& t : m.groups[0].params) {
    const SafetensorsTensorInfo* info = (*file)->find(t.name);
    const uint64_t seed = FixtureData::seed(p++, 0);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, ElementType::kBF16) << t.name;
    const auto bytes = (*file)->data(*info);
    for (size_t j = 0; j < bytes.size() / 2; ++j) {
      uint16_t v;
      std::memcpy(&v, bytes.data() + 2 * j, 2);
      ASSERT_EQ(v, reference::float_to_bf16_bits(testing::fixture_value(seed, j))) << t.name << "[" << j << "]";
    }
  }
}

TEST(WithTorchDtype, SetsTheKeyTheFileUsesAndKeepsTheRest) {
  auto fp32 = with_torch_dtype(testing::tiny_llama_config(), ElementType::kF32);
  ASSERT_OK(fp32);
  auto want = nlohmann::ordered_json::parse(testing::tiny_llama_config());
  want["torch_dtype"] = "float32";
  EXPECT_EQ(nlohmann::ordered_json::parse(*fp32), want);
  auto v5 = with_torch_dtype(R"({"model_type": "qwen2", "dtype": "float32", "eos_token_id": 7})", ElementType::kF16);
  ASSERT_OK(v5);
  EXPECT_EQ(nlohmann::ordered_json::parse(*v5),
            nlohmann::ordered_json::parse(R"({"model_type": "qwen2", "dtype": "float16", "eos_token_id": 7})"));
  EXPECT_FALSE(nlohmann::ordered_json::parse(*v5).contains("torch_dtype"));
  EXPECT_ERROR(with_torch_dtype("[1, 2]", ElementType::kBF16), ErrorCode::kCorrupt, "config.json");
}

}  // namespace
}  // namespace tierzero::checkpoint
