// Engine checkpoints: layout math, save/load round trips for stages 0-3 (raw and zstd), loading
// into other world sizes, and the training state kept verbatim.
#include "checkpoint/engine_format/engine_checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "checkpoint_fixture.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::FixtureData;
using testing::ScratchDir;
using testing::tiny_llama_manifest;

std::vector<float> read_partition(CheckpointReader& reader, size_t g, size_t s, uint32_t w, uint32_t r) {
  const CheckpointManifest& m = reader.manifest();
  std::vector<float> out(partition_numel(m.groups[g], m.zero_stage, w, m.alignment));
  Status status = reader.read_partition(g, s, w, r, std::as_writable_bytes(std::span(out)));
  EXPECT_OK(status);
  return out;
}

TEST(PartitionLayout, FollowsDeepSpeedPadding) {
  FlatGroup g;
  g.params = {{"a", {5}}, {"b", {8}}};  // 13 elements
  // Stages 1-2: padded to a multiple of 2 * W = 8 -> 16, 4 per rank; rank 3 holds only padding.
  EXPECT_EQ(partition_numel(g, 2, 4, 2), 4u);
  auto seg = partition_segments(g, 2, 4, 2, 3);
  ASSERT_EQ(seg.size(), 1u);
  EXPECT_EQ(seg[0].logical_begin, 12u);
  EXPECT_EQ(seg[0].length, 1u);
  // Stage 3: each parameter split in ceil(n / W) pieces: a -> 2, b -> 2; rank 2 holds a[4] and b[4..6).
  EXPECT_EQ(partition_numel(g, 3, 4, 2), 4u);
  seg = partition_segments(g, 3, 4, 2, 2);
  ASSERT_EQ(seg.size(), 2u);
  EXPECT_EQ(seg[0].logical_begin, 4u);
  EXPECT_EQ(seg[0].length, 1u);
  EXPECT_EQ(seg[0].partition_begin, 0u);
  EXPECT_EQ(seg[1].logical_begin, 9u);
  EXPECT_EQ(seg[1].partition_begin, 2u);
  // Stage 0: everyone's partition is the whole flat.
  EXPECT_EQ(partition_numel(g, 0, 4, 2), 13u);
}

struct RoundTripCase {
  int stage;
  uint32_t world;
  int level;
};

class EngineRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(EngineRoundTrip, SavesAndLoadsEveryRankAndTheTrainingState) {
  const auto [stage, world, level] = GetParam();
  ScratchDir dir;
  const CheckpointManifest m = tiny_llama_manifest(stage, world);
  FixtureData data(m);
  const auto ranks = data.ranks();
  CheckpointOptions options;
  options.compression_level = level;
  ASSERT_OK(save_checkpoint(dir.path(), "global_step1234", m, ranks, options));
  EXPECT_EQ(testing::read_text(dir.file("latest")), "global_step1234");

  auto reader = CheckpointReader::open(dir.path());
  ASSERT_OK(reader);
  const CheckpointManifest& got = (*reader)->manifest();
  EXPECT_EQ(got.zero_stage, stage);
  EXPECT_EQ(got.world_size, world);
  EXPECT_EQ(got.step, 1234);
  EXPECT_EQ(got.loss_scaler, m.loss_scaler);
  EXPECT_EQ(got.lr_scheduler, m.lr_scheduler);
  EXPECT_EQ(got.data_position, m.data_position);
  EXPECT_EQ(got.model_config_json, m.model_config_json);
  EXPECT_EQ(got.aliases, m.aliases);
  for (uint32_t r = 0; r < world; ++r) {
    EXPECT_EQ((*reader)->rank_state(r)["rng_seed"], 42 + r);
    for (size_t g = 0; g < m.groups.size(); ++g) {
      for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
        EXPECT_EQ(read_partition(**reader, g, s, world, r), data.partition(g, s, world, r))
            << "rank " << r << " group " << g << " state " << s;
      }
    }
  }
  std::vector<float> inv_freq(2);
  ASSERT_OK((*reader)->read_replicated(0, 0, std::as_writable_bytes(std::span(inv_freq))));
  EXPECT_EQ(inv_freq[1], testing::fixture_value(1000, 1));
  auto report = verify_checkpoint(dir.path());
  ASSERT_OK(report);
  EXPECT_EQ(report->files_checked, world);
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineRoundTrip,
                         ::testing::Values(RoundTripCase{0, 2, 0}, RoundTripCase{1, 2, 0}, RoundTripCase{2, 4, 3},
                                           RoundTripCase{3, 3, 0}, RoundTripCase{3, 4, 5}),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_w" + std::to_string(info.param.world) +
                                  (info.param.level > 0 ? "_zstd" : "_raw");
                         });

class EngineReshard : public ::testing::TestWithParam<int> {};

TEST_P(EngineReshard, GivesEachRankItsPartitionAtAnyWorldSize) {
  const int stage = GetParam();
  ScratchDir dir;
  const CheckpointManifest m = tiny_llama_manifest(stage, 4);
  FixtureData data(m);
  CheckpointOptions options;
  options.compression_level = stage == 2 ? 1 : 0;
  ASSERT_OK(save_checkpoint(dir.path(), "t", m, data.ranks(), options));
  auto reader = CheckpointReader::open(dir.path());
  ASSERT_OK(reader);
  for (uint32_t w : {1u, 2u, 3u, 5u, 8u}) {
    for (uint32_t r = 0; r < w; ++r) {
      for (size_t g = 0; g < m.groups.size(); ++g) {
        for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
          ASSERT_EQ(read_partition(**reader, g, s, w, r), data.partition(g, s, w, r))
              << "world " << w << " rank " << r << " group " << g << " state " << s;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, EngineReshard, ::testing::Values(1, 2, 3));

TEST(EngineCheckpoint, ReadsFlatRangesAcrossRanks) {
  ScratchDir dir;
  const CheckpointManifest m = tiny_llama_manifest(3, 3);
  FixtureData data(m);
  ASSERT_OK(save_checkpoint(dir.path(), "t", m, data.ranks()));
  auto reader = CheckpointReader::open(dir.path(), "t");
  ASSERT_OK(reader);
  std::vector<float> range(100);
  ASSERT_OK((*reader)->read_flat_range(0, 1, 250, std::as_writable_bytes(std::span(range))));
  for (size_t i = 0; i < range.size(); ++i) EXPECT_EQ(range[i], data.logical(0, 1)[250 + i]) << i;
  // Going backwards restarts the stream.
  ASSERT_OK((*reader)->read_flat_range(0, 1, 3, std::as_writable_bytes(std::span(range))));
  EXPECT_EQ(range[0], data.logical(0, 1)[3]);
  EXPECT_OK((*reader)->finish_reads());
}

// A tensor above the parallel-read threshold: its pieces come from every rank file at once.
TEST(EngineCheckpoint, ReadsLargeTensorsFromAllRanksConcurrently) {
  ScratchDir dir;
  CheckpointManifest m;
  m.zero_stage = 3;
  m.world_size = 4;
  FlatGroup g;
  g.params = {{"small", {3}}, {"big", {2048, 1100}}, {"tail", {5}}};
  g.states = {{"fp32", ElementType::kF32}};
  m.groups.push_back(g);
  FixtureData data(m);
  ASSERT_OK(save_checkpoint(dir.path(), "t", m, data.ranks()));
  auto reader = CheckpointReader::open(dir.path());
  ASSERT_OK(reader);
  std::vector<float> big(2048 * 1100 + 5);
  ASSERT_OK((*reader)->read_flat_range(0, 0, 3, std::as_writable_bytes(std::span(big))));
  EXPECT_TRUE(std::equal(big.begin(), big.end(), data.logical(0, 0).begin() + 3));
  EXPECT_OK((*reader)->finish_reads());
}

TEST(EngineCheckpoint, RefusesAnExistingTagAndMismatchedData) {
  ScratchDir dir;
  const CheckpointManifest m = tiny_llama_manifest(2, 2);
  FixtureData data(m);
  ASSERT_OK(save_checkpoint(dir.path(), "t", m, data.ranks()));
  Status again = save_checkpoint(dir.path(), "t", m, data.ranks());
  EXPECT_EQ(again.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(again.message().find("already exists"), std::string::npos) << again.message();

  auto ranks = data.ranks();
  ranks[1].group_states[0][2] = ranks[1].group_states[0][2].first(8);
  Status short_data = save_checkpoint(dir.path(), "u", m, ranks);
  EXPECT_NE(short_data.message().find("rank 1 group 0 state 'exp_avg_sq': 8 bytes given"), std::string::npos)
      << short_data.message();
  EXPECT_EQ(testing::read_text(dir.file("latest")), "t");
}

TEST(EngineCheckpoint, CommitRefusesAMissingRank) {
  ScratchDir dir;
  const CheckpointManifest m = tiny_llama_manifest(1, 2);
  FixtureData data(m);
  const auto ranks = data.ranks();
  ASSERT_OK(begin_checkpoint(dir.path(), "t", m));
  ASSERT_OK(write_checkpoint_rank(dir.path(), "t", m, 0, ranks[0]));
  Status commit = commit_checkpoint(dir.path(), "t", m);
  EXPECT_EQ(commit.code(), ErrorCode::kNotFound);
  EXPECT_NE(commit.message().find("rank 1 has not written its checkpoint file"), std::string::npos) << commit.message();
  EXPECT_FALSE(std::filesystem::exists(dir.file("t")));
}

}  // namespace
}  // namespace tierzero::checkpoint
