// Sections streamed into a rank file (RankData::group_state_fills) make the same checkpoint, byte for
// byte, as the same bytes given whole (group_states): raw and zstd, states larger than a staging
// buffer and a compression piece (so the writer asks for several pieces), and the fixture's stage
// 1-3 layouts. A fill's error ends the save with that error.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint_fixture.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// RankData that streams `whole`'s group states, handing out bytes in the order asked; counts pieces.
RankData streamed(const RankData& whole, int* pieces) {
  RankData data;
  data.replicated = whole.replicated;
  data.rank_state = whole.rank_state;
  for (const auto& group : whole.group_states) {
    std::vector<SectionFill> fills;
    for (std::span<const std::byte> bytes : group)
      fills.push_back([bytes, pieces, offset = size_t{0}](std::span<std::byte> out) mutable -> Status {
        if (offset + out.size() > bytes.size()) return internal_error("asked past the section's end");
        std::memcpy(out.data(), bytes.data() + offset, out.size());
        offset += out.size();
        ++*pieces;
        return Status();
      });
    data.group_state_fills.push_back(std::move(fills));
  }
  return data;
}

// Saves `ranks` whole into DIR/whole and streamed into DIR/streamed; expects every file the same.
void expect_same_files(const std::string& dir, const CheckpointManifest& manifest, const std::vector<RankData>& ranks,
                       int level, int min_pieces) {
  CheckpointOptions options;
  options.compression_level = level;
  ASSERT_OK(save_checkpoint(dir + "/whole", "t", manifest, ranks, options));
  int pieces = 0;
  std::vector<RankData> streams;
  for (const RankData& rank : ranks) streams.push_back(streamed(rank, &pieces));
  ASSERT_OK(save_checkpoint(dir + "/streamed", "t", manifest, streams, options));
  EXPECT_GE(pieces, min_pieces);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/whole/t")) {
    const std::string name = entry.path().filename();
    EXPECT_EQ(file_bytes(entry.path()), file_bytes(dir + "/streamed/t/" + name)) << name << " level " << level;
    ++files;
  }
  EXPECT_GE(files, static_cast<int>(manifest.world_size) + 1);
  ASSERT_OK(verify_checkpoint(dir + "/streamed").status());
}

TEST(StreamedSections, FixtureLayoutsAreTheSameFiles) {
  for (int stage : {0, 1, 2, 3}) {
    for (int level : {0, 3}) {
      test_support::ScratchDir dir("streamed-sections");
      const CheckpointManifest manifest = testing::tiny_llama_manifest(stage, 2);
      const testing::FixtureData data(manifest);
      expect_same_files(dir.path(), manifest, data.ranks(), level, 3);
    }
  }
}

// Three 12 MB states: more than a 4 MiB compression piece and, together, a 16 MiB staging buffer.
TEST(StreamedSections, LargeStatesComeInSeveralPieces) {
  CheckpointManifest manifest;
  manifest.zero_stage = 1;
  manifest.world_size = 1;
  FlatGroup group;
  group.params = {{"w", {3'000'000}}};
  group.states = {{"fp32", ElementType::kF32}, {"exp_avg", ElementType::kF32}, {"exp_avg_sq", ElementType::kBF16}};
  manifest.groups.push_back(group);
  std::vector<std::vector<std::byte>> states;
  for (size_t s = 0; s < 3; ++s) {
    std::vector<std::byte>& bytes =
        states.emplace_back(partition_numel(group, 1, 1, manifest.alignment) * (s == 2 ? 2 : 4));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>((i * 2654435761u + s) >> 13);
  }
  RankData rank;
  rank.group_states.push_back({states[0], states[1], states[2]});
  rank.rank_state = {{"iteration", 7}};
  for (int level : {0, 3}) {
    test_support::ScratchDir dir("streamed-sections");
    expect_same_files(dir.path(), manifest, {rank}, level, level > 0 ? 8 : 4);
  }
}

TEST(StreamedSections, AFillErrorEndsTheSave) {
  test_support::ScratchDir dir("streamed-sections");
  const CheckpointManifest manifest = testing::tiny_llama_manifest(1, 1);
  const testing::FixtureData data(manifest);
  int pieces = 0;
  RankData rank = streamed(data.ranks()[0], &pieces);
  rank.group_state_fills[0][1] = [](std::span<std::byte>) { return io_error("swap read failed (test)"); };
  ASSERT_OK(begin_checkpoint(dir.path(), "t", manifest));
  EXPECT_ERROR(write_checkpoint_rank(dir.path(), "t", manifest, 0, rank), ErrorCode::kIo, "swap read failed (test)");
  RankData both = data.ranks()[0];
  both.group_state_fills = streamed(both, &pieces).group_state_fills;
  EXPECT_ERROR(write_checkpoint_rank(dir.path(), "t", manifest, 0, both), ErrorCode::kInvalidArgument, "not both");
}

}  // namespace
}  // namespace tierzero::checkpoint
