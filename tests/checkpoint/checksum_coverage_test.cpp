// Every byte of a saved engine checkpoint is under a checksum (issue 15): one bit flipped in any
// file of a small checkpoint — rank data, manifest.json, rank_NNNNN.json, checksums.txt, latest,
// latest.xxh3 —
// is reported by verify_checkpoint and refused by the resume reader and by the converter's source
// (which may ignore damage in optimizer states it never reads: its output is then unchanged).
// Also: the checksum file's own format, and version-1 checkpoints (no checksums.txt) still load.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/checksum_file.h"
#include "checkpoint_fixture.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::FixtureData;
using testing::ScratchDir;

// A group with two states, a replicated tensor, an alias, rank states, a model config: every kind
// of metadata, small enough to flip every byte.
CheckpointManifest small_manifest() {
  CheckpointManifest m;
  m.zero_stage = 2;
  m.world_size = 2;
  m.step = 7;
  FlatGroup g;
  g.params = {{"model.embed_tokens.weight", {4, 3}}, {"model.layers.0.mlp.up_proj.weight", {5}}};
  g.states = {{"fp32", ElementType::kF32}, {"exp_avg", ElementType::kF32}};
  m.groups.push_back(g);
  m.replicated = {{{"model.rotary.inv_freq", {2}}, ElementType::kF32}};
  m.aliases = {{"lm_head.weight", "model.embed_tokens.weight"}};
  m.loss_scaler = {{"cur_scale", 1.0}};
  m.lr_scheduler = {{"last_batch_iteration", 6}};
  m.data_position = {{"epoch", 0}, {"sample", 56}};
  m.model_config_json = R"({"model_type": "llama"})";
  return m;
}

class ChecksumCoverage : public ::testing::Test {
 protected:
  void SetUp() override {
    manifest_ = small_manifest();
    data_ = std::make_unique<FixtureData>(manifest_);
    auto ranks = data_->ranks();
    ranks[0].rank_state = {{"rng", 11}};
    ranks[1].rank_state = {{"rng", 12}};
    ASSERT_OK(save_checkpoint(dir_.path(), "step7", manifest_, ranks));
  }

  // What a resume does: open, read every partition at the saved world size, every replicated
  // tensor, and the rank states.
  Status resume() const {
    TZ_ASSIGN_OR_RETURN(auto reader, CheckpointReader::open(dir_.path()));
    const CheckpointManifest& m = reader->manifest();
    for (size_t g = 0; g < m.groups.size(); ++g) {
      for (size_t s = 0; s < m.groups[g].states.size(); ++s) {
        for (uint32_t r = 0; r < m.world_size; ++r) {
          std::vector<std::byte> out(partition_numel(m.groups[g], m.zero_stage, m.world_size, m.alignment) *
                                     element_bits(m.groups[g].states[s].dtype) / 8);
          TZ_RETURN_IF_ERROR(reader->read_partition(g, s, m.world_size, r, out));
        }
      }
    }
    for (size_t i = 0; i < m.replicated.size(); ++i) {
      std::vector<std::byte> out(m.replicated[i].spec.numel() * element_bits(m.replicated[i].dtype) / 8);
      TZ_RETURN_IF_ERROR(reader->read_replicated(i, 0, out));
    }
    if (reader->rank_state(0) != nlohmann::json{{"rng", 11}}) return internal_error("rank state changed");
    return {};
  }

  // What a convert reads (every tensor whole, fp32) and the names it would write them under.
  Result<std::vector<std::pair<std::string, std::vector<float>>>> convert_reads() const {
    TZ_ASSIGN_OR_RETURN(auto source, open_engine_checkpoint_source(dir_.path()));
    std::vector<std::pair<std::string, std::vector<float>>> tensors;
    for (size_t i = 0; i < source->tensors().size(); ++i) {
      std::vector<float> out(source->tensors()[i].numel());
      TZ_RETURN_IF_ERROR(source->read_fp32(i, out));
      tensors.emplace_back(source->tensors()[i].name, std::move(out));
    }
    return tensors;
  }

  // Byte ranges of rank file `rank` that a convert never reads: optimizer states other than
  // states[0] (the fp32 master). A flip there must leave the converted model unchanged.
  std::vector<std::pair<uint64_t, uint64_t>> unread_by_convert(uint32_t rank) const {
    const auto m = nlohmann::json::parse(testing::read_text(dir_.file("step7/manifest.json")));
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (const auto& section : m["files"][rank]["sections"]) {
      if (section["replicated"].get<bool>() || section["state"].get<int>() == 0) continue;
      const auto offset = section["offset"].get<uint64_t>();
      ranges.emplace_back(offset, offset + section["stored_bytes"].get<uint64_t>());
    }
    return ranges;
  }

  ScratchDir dir_;
  CheckpointManifest manifest_;
  std::unique_ptr<FixtureData> data_;
};

TEST_F(ChecksumCoverage, IntactCheckpointPasses) {
  ASSERT_OK(verify_checkpoint(dir_.path()));
  ASSERT_OK(resume());
  ASSERT_OK(convert_reads());
  const auto text = testing::read_text(dir_.file("step7/checksums.txt"));
  auto entries = parse_checksum_file(text, "checksums.txt");
  ASSERT_OK(entries);
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "manifest.json");
  EXPECT_EQ((*entries)[2].name, "rank_00001.json");
  EXPECT_EQ(checksum_file_text(*entries), text);
}

// The acceptance test: every byte of every file flipped in turn, one bit each (all eight bits of
// checksums.txt, latest and latest.xxh3). Verify and resume must refuse every one; convert must refuse every
// one except flips in optimizer states it does not read, which must leave its output unchanged.
TEST_F(ChecksumCoverage, EveryFlippedByteIsCaught) {
  const auto intact = convert_reads();
  ASSERT_OK(intact);
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path())) {
    if (e.is_regular_file()) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), 8u);  // latest, latest.xxh3, checksums.txt, manifest.json, 2 x (rank .bin + .json)
  size_t trials = 0, verify_caught = 0, resume_caught = 0, convert_caught = 0, convert_unaffected = 0;
  for (const std::string& path : files) {
    const std::vector<uint8_t> original = testing::read_file(path);
    const bool all_bits = path.ends_with("checksums.txt") || path.ends_with("latest") || path.ends_with("latest.xxh3");
    std::vector<std::pair<uint64_t, uint64_t>> unread;
    if (path.ends_with("rank_00000.bin")) unread = unread_by_convert(0);
    if (path.ends_with("rank_00001.bin")) unread = unread_by_convert(1);
    for (size_t i = 0; i < original.size(); ++i) {
      const bool convert_skips =
          std::any_of(unread.begin(), unread.end(), [&](const auto& r) { return i >= r.first && i < r.second; });
      for (int bit = 0; bit < 8; ++bit) {
        if (!all_bits && bit != static_cast<int>((i * 5 + 3) % 8)) continue;
        std::vector<uint8_t> flipped = original;
        flipped[i] ^= static_cast<uint8_t>(1u << bit);
        testing::write_file(path, flipped);
        ++trials;
        const std::string where = path + " byte " + std::to_string(i) + " bit " + std::to_string(bit);
        const bool verify_refused = !verify_checkpoint(dir_.path()).ok();
        const bool resume_refused = !resume().ok();
        EXPECT_TRUE(verify_refused) << where;
        EXPECT_TRUE(resume_refused) << where;
        verify_caught += verify_refused;
        resume_caught += resume_refused;
        const auto converted = convert_reads();
        if (!converted.ok()) {
          ++convert_caught;
        } else {
          EXPECT_TRUE(convert_skips) << where << ": convert accepted a flip in bytes it reads";
          EXPECT_TRUE(*converted == *intact) << where << ": convert gave a different model";
          convert_unaffected += convert_skips && *converted == *intact;
        }
      }
    }
    testing::write_file(path, original);
  }
  ASSERT_OK(verify_checkpoint(dir_.path()));
  std::printf(
      "checksum coverage: %zu single-bit flips over %zu files; verify refused %zu, resume refused %zu, "
      "convert refused %zu and gave the unchanged model for %zu (flips in optimizer states it does "
      "not read)\n",
      trials, files.size(), verify_caught, resume_caught, convert_caught, convert_unaffected);
}

TEST_F(ChecksumCoverage, MissingChecksumFileIsCorrupt) {
  std::filesystem::remove(dir_.file("step7/checksums.txt"));
  EXPECT_ERROR(verify_checkpoint(dir_.path()), ErrorCode::kCorrupt, "checksums.txt is missing");
  EXPECT_ERROR(CheckpointReader::open(dir_.path()), ErrorCode::kCorrupt, "checksums.txt is missing");
}

TEST_F(ChecksumCoverage, MessageNamesTheDamagedFile) {
  std::string record = testing::read_text(dir_.file("step7/rank_00001.json"));
  record[record.size() / 2] ^= 1;
  testing::write_text(dir_.file("step7/rank_00001.json"), record);
  EXPECT_ERROR(verify_checkpoint(dir_.path()), ErrorCode::kCorrupt, "rank_00001.json: checksum mismatch");
}

// A version-1 checkpoint (written before checksums.txt existed) is still read.
TEST_F(ChecksumCoverage, VersionOneCheckpointStillLoads) {
  nlohmann::json m = nlohmann::json::parse(testing::read_text(dir_.file("step7/manifest.json")));
  m["format_version"] = 1;
  testing::write_text(dir_.file("step7/manifest.json"), m.dump(1) + "\n");
  std::filesystem::remove(dir_.file("step7/checksums.txt"));
  EXPECT_OK(verify_checkpoint(dir_.path()));
  EXPECT_OK(resume());
  EXPECT_OK(convert_reads());
}

TEST(ChecksumFile, RejectsEveryMalformation) {
  const std::string good = checksum_file_text({{"manifest.json", 10, 0xabc}, {"rank_00000.json", 5, 7}});
  ASSERT_OK(parse_checksum_file(good, "c"));
  for (const std::string& bad :
       {std::string(), good.substr(0, good.size() - 1), good + "\n", "x" + good, good.substr(good.find('\n') + 1)}) {
    EXPECT_ERROR(parse_checksum_file(bad, "c"), ErrorCode::kCorrupt, "") << bad;
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
