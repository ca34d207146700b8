// Resharding engine checkpoints: every stage, to larger and smaller world sizes, raw and zstd; the
// copy verifies (sizes, checksums), holds exactly the partitions FixtureData builds independently
// for the new world size, keeps the training state, and resharding back gives the original bytes.
#include "checkpoint/reshard/reshard.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "tests/checkpoint/checkpoint_fixture.h"
#include "tests/checkpoint/test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::FixtureData;
using testing::ScratchDir;
using testing::tiny_llama_manifest;

struct ReshardCase {
  int stage;
  uint32_t from;
  uint32_t to;
  int level;
};

class Reshard : public ::testing::TestWithParam<ReshardCase> {};

std::vector<float> partition(CheckpointReader& reader, size_t g, size_t s, uint32_t w, uint32_t r) {
  const CheckpointManifest& m = reader.manifest();
  std::vector<float> out(partition_numel(m.groups[g], m.zero_stage, w, m.alignment));
  EXPECT_OK(reader.read_partition(g, s, w, r, std::as_writable_bytes(std::span(out))));
  return out;
}

TEST_P(Reshard, WritesTheNewWorldSizesPartitionsAndKeepsTheState) {
  const auto [stage, from, to, level] = GetParam();
  ScratchDir dir;
  CheckpointManifest manifest = tiny_llama_manifest(stage, from);
  manifest.step = 42;
  manifest.loss_scaler = {{"scale", 1024}};
  const FixtureData data(manifest);
  auto ranks = data.ranks();
  for (uint32_t r = 0; r < from; ++r) ranks[r].rank_state = {{"rng", r}};
  ASSERT_OK(save_checkpoint(dir.file("src"), "step42", manifest, ranks));

  ReshardOptions options;
  options.world_size = to;
  options.compression_level = level;
  auto report = reshard_engine_checkpoint(dir.file("src"), dir.file("out"), options);
  ASSERT_OK(report);
  EXPECT_EQ(report->tag, "step42");
  EXPECT_EQ(report->from_world_size, from);
  EXPECT_EQ(report->to_world_size, to);
  ASSERT_OK(verify_checkpoint(dir.file("out")));

  auto reader = CheckpointReader::open(dir.file("out"));
  ASSERT_OK(reader);
  const CheckpointManifest& m = (*reader)->manifest();
  EXPECT_EQ(m.world_size, to);
  EXPECT_EQ(m.step, 42);
  EXPECT_EQ(m.loss_scaler, manifest.loss_scaler);
  EXPECT_EQ(m.aliases, manifest.aliases);
  EXPECT_EQ(m.model_config_json, manifest.model_config_json);
  for (uint32_t r = 0; r < to; ++r) {
    const nlohmann::json want = r < from ? nlohmann::json({{"rng", r}}) : nlohmann::json();
    EXPECT_EQ((*reader)->rank_state(r), want) << r;
  }
  for (size_t g = 0; g < m.groups.size(); ++g) {
    for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
      for (uint32_t r = 0; r < (stage == 0 ? 1u : to); ++r) {
        EXPECT_EQ(partition(**reader, g, s, to, r), data.partition(g, s, to, r)) << "g" << g << " s" << s << " r" << r;
      }
      // And back at the original world size, the original partitions.
      for (uint32_t r = 0; r < (stage == 0 ? 1u : from); ++r) {
        EXPECT_EQ(partition(**reader, g, s, from, r), data.partition(g, s, from, r)) << "g" << g << " s" << s;
      }
    }
  }
  std::vector<float> buffer(m.replicated[0].spec.numel());
  ASSERT_OK((*reader)->read_replicated(0, 0, std::as_writable_bytes(std::span(buffer))));
  for (size_t j = 0; j < buffer.size(); ++j) ASSERT_EQ(buffer[j], testing::fixture_value(1000, j));
}

INSTANTIATE_TEST_SUITE_P(Cases, Reshard,
                         ::testing::Values(ReshardCase{1, 2, 3, 0}, ReshardCase{2, 4, 1, 3}, ReshardCase{3, 2, 5, 0},
                                           ReshardCase{3, 3, 2, 1}, ReshardCase{0, 1, 2, 0}),
                         [](const ::testing::TestParamInfo<ReshardCase>& p) {
                           return "stage" + std::to_string(p.param.stage) + "_w" + std::to_string(p.param.from) +
                                  "_to_w" + std::to_string(p.param.to) + (p.param.level ? "_zstd" : "");
                         });

TEST(ReshardRefuses, ZeroWorldSizeTheSameFolderAndADamagedSource) {
  ScratchDir dir;
  const CheckpointManifest manifest = tiny_llama_manifest(2, 2);
  const FixtureData data(manifest);
  ASSERT_OK(save_checkpoint(dir.file("src"), "t", manifest, data.ranks()));
  ReshardOptions options;
  options.world_size = 0;
  EXPECT_EQ(reshard_engine_checkpoint(dir.file("src"), dir.file("out"), options).status().code(),
            ErrorCode::kInvalidArgument);
  options.world_size = 3;
  EXPECT_EQ(reshard_engine_checkpoint(dir.file("src"), dir.file("src"), options).status().code(),
            ErrorCode::kInvalidArgument);

  // A flipped byte in rank 1's file: the checksum check names the file, and OUT gets no `latest`.
  const std::string rank1 = dir.file("src") + "/t/rank_00001.bin";
  auto bytes = testing::read_file(rank1);
  bytes[bytes.size() / 2] ^= 0x40;
  testing::write_file(rank1, bytes);
  EXPECT_ERROR(reshard_engine_checkpoint(dir.file("src"), dir.file("out"), options), ErrorCode::kCorrupt,
               "rank_00001.bin");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out") + "/latest"));
}

}  // namespace
}  // namespace tierzero::checkpoint
