// open_deepspeed_resume_reader on the DeepSpeed-written corpus (tests/data/deepspeed): the fp32
// state equals the consolidation source's trainable tensors, every state re-partitions for other
// world sizes consistently, and the scalars (step, loss scaler, iteration) are DeepSpeed's. Its
// values against DeepSpeed's own continued training: tests/engine/train/deepspeed_migration.py.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string case_dir(const std::string& name) { return std::string(TIERZERO_DEEPSPEED_CORPUS_DIR) + "/" + name; }

nlohmann::json case_info(const std::string& name) {
  std::ifstream in(case_dir(name) + "/case.json");
  return nlohmann::json::parse(in);
}

std::vector<std::string> unfrozen_cases() {
  std::vector<std::string> cases;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(TIERZERO_DEEPSPEED_CORPUS_DIR, ec)) {
    if (fs::exists(e.path() / "case.json") && case_info(e.path().filename().string())["frozen"].empty()) {
      cases.push_back(e.path().filename().string());
    }
  }
  std::sort(cases.begin(), cases.end());
  return cases;
}

std::vector<float> read_flat(CheckpointReader& reader, size_t state) {
  std::vector<float> flat(reader.manifest().groups[0].numel());
  EXPECT_OK(reader.read_flat_range(0, state, 0, std::as_writable_bytes(std::span(flat))));
  return flat;
}

class DeepSpeedResume : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepSpeedResume, Fp32StateIsTheConsolidatedMaster) {
  const std::string dir = case_dir(GetParam());
  ASSERT_OK_AND_ASSIGN(auto reader, open_deepspeed_resume_reader(dir, "", {}));
  ASSERT_OK_AND_ASSIGN(auto source, open_deepspeed_checkpoint(dir, ""));
  const std::vector<float> flat = read_flat(*reader, 0);
  uint64_t offset = 0;
  for (const TensorSpec& p : reader->manifest().groups[0].params) {
    const auto& specs = source->tensors();
    const auto it = std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == p.name; });
    ASSERT_NE(it, specs.end()) << p.name;
    std::vector<float> whole(static_cast<size_t>(p.numel()));
    ASSERT_OK(source->read_fp32(static_cast<size_t>(it - specs.begin()), whole));
    EXPECT_EQ(0, std::memcmp(whole.data(), flat.data() + offset, whole.size() * sizeof(float))) << p.name;
    offset += whole.size();
  }
  EXPECT_EQ(offset, flat.size());
}

TEST_P(DeepSpeedResume, EveryStateRepartitionsForOtherWorldSizes) {
  ASSERT_OK_AND_ASSIGN(auto reader, open_deepspeed_resume_reader(case_dir(GetParam()), "", {}));
  const CheckpointManifest& m = reader->manifest();
  for (size_t state = 0; state < 3; ++state) {
    const std::vector<float> flat = read_flat(*reader, state);
    if (state == 2) {
      EXPECT_TRUE(std::all_of(flat.begin(), flat.end(), [](float v) { return v >= 0; })) << "exp_avg_sq < 0";
    }
    EXPECT_TRUE(std::any_of(flat.begin(), flat.end(), [](float v) { return v != 0; })) << "state " << state;
    for (uint32_t world : {1u, 2u, 3u}) {
      std::vector<float> rebuilt(flat.size(), -1.0f);
      for (uint32_t rank = 0; rank < world; ++rank) {
        std::vector<float> part(partition_numel(m.groups[0], m.zero_stage, world, m.alignment));
        ASSERT_OK(reader->read_partition(0, state, world, rank, std::as_writable_bytes(std::span(part))));
        for (const PartitionSegment& s : partition_segments(m.groups[0], m.zero_stage, world, m.alignment, rank)) {
          std::copy_n(part.begin() + s.partition_begin, s.length, rebuilt.begin() + s.logical_begin);
        }
      }
      EXPECT_EQ(rebuilt, flat) << "state " << state << " world " << world;
    }
  }
}

// A reader of another format stores its states raw: read as stored, in odd byte ranges, each rank's
// partition at the saved world size is read_partition's.
TEST_P(DeepSpeedResume, StoredPartsAreTheSavedPartitions) {
  ASSERT_OK_AND_ASSIGN(auto reader, open_deepspeed_resume_reader(case_dir(GetParam()), "", {}));
  const CheckpointManifest& m = reader->manifest();
  const uint64_t numel = partition_numel(m.groups[0], m.zero_stage, m.world_size, m.alignment);
  for (uint32_t r = 0; r < m.world_size; ++r) {
    for (size_t s = 0; s < 3; ++s) {
      std::vector<float> whole(numel), stored(numel);
      ASSERT_OK(reader->read_partition(0, s, m.world_size, r, std::as_writable_bytes(std::span(whole))));
      const std::span<std::byte> bytes = std::as_writable_bytes(std::span(stored));
      for (uint64_t at = 0; at < bytes.size(); at += 44) {
        ASSERT_OK(reader->read_stored(0, s, 0, r, at, bytes.subspan(at, std::min<uint64_t>(44, bytes.size() - at))));
      }
      EXPECT_EQ(0, std::memcmp(whole.data(), stored.data(), bytes.size())) << "rank " << r << " state " << s;
    }
  }
  std::vector<float> one(1);
  EXPECT_ERROR(reader->read_stored(0, 0, 1, 0, 0, std::as_writable_bytes(std::span(one))),
               ErrorCode::kInvalidArgument, "no stored part 1");
}

TEST_P(DeepSpeedResume, ScalarsAreDeepSpeeds) {
  const nlohmann::json info = case_info(GetParam());
  ASSERT_OK_AND_ASSIGN(auto reader, open_deepspeed_resume_reader(case_dir(GetParam()), "", {}));
  const CheckpointManifest& m = reader->manifest();
  EXPECT_EQ(m.zero_stage, info["zero_stage"].get<int>());
  EXPECT_EQ(m.world_size, info["world_size"].get<uint32_t>());
  EXPECT_EQ(m.step, 2);  // make_corpus.py trains two steps
  EXPECT_EQ(reader->rank_state(0).value("iteration", -1), 2);
  EXPECT_TRUE(m.lr_scheduler.is_null());  // no scheduler in the corpus runs
  EXPECT_FALSE(m.model_config_json.empty());
  const bool fp16 = info["dtype"] == "fp16";
  EXPECT_EQ(m.loss_scaler.value("dynamic", !fp16), fp16);
  EXPECT_EQ(m.loss_scaler.value("cur_scale", 0.0), fp16 ? 256.0 : 1.0);  // initial_scale_power 8, no overflow
  if (fp16) EXPECT_EQ(m.loss_scaler.value("cur_iter", -1), 2);
}

INSTANTIATE_TEST_SUITE_P(Cases, DeepSpeedResume, ::testing::ValuesIn(unfrozen_cases()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The model's parameters must be exactly the run's trainable ones.
TEST(DeepSpeedResumeOrder, RefusesParametersThatDoNotMatch) {
  const std::string dir = case_dir("w2_s3_fp32_untied_frozen_offload_gather");
  ASSERT_OK_AND_ASSIGN(auto plain, open_deepspeed_resume_reader(dir, "", {}));
  std::vector<TensorSpec> order = plain->manifest().groups[0].params;
  std::reverse(order.begin(), order.end());
  ASSERT_OK_AND_ASSIGN(auto reversed, open_deepspeed_resume_reader(dir, "", order));
  EXPECT_EQ(reversed->manifest().groups[0].params.front().name, order.front().name);

  std::vector<TensorSpec> frozen = order;
  frozen.push_back({"model.layers.0.mlp.up_proj.weight", {40, 16}});
  EXPECT_ERROR(open_deepspeed_resume_reader(dir, "", frozen).status(), ErrorCode::kInvalidArgument,
               "no trainable parameter 'model.layers.0.mlp.up_proj.weight'");
  std::vector<TensorSpec> fewer(order.begin() + 1, order.end());
  EXPECT_ERROR(open_deepspeed_resume_reader(dir, "", fewer).status(), ErrorCode::kInvalidArgument,
               "trains parameter '" + order.front().name + "'");
  std::vector<TensorSpec> reshaped = order;
  reshaped[0].shape.push_back(1);
  EXPECT_ERROR(open_deepspeed_resume_reader(dir, "", reshaped).status(), ErrorCode::kInvalidArgument, "another shape");
}

}  // namespace
}  // namespace tierzero::checkpoint
