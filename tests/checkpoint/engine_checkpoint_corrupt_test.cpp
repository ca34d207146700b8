// One seeded corrupt engine checkpoint per error class; verify (and the loader) reject each with
// its own message naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

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

class CorruptEngineCheckpoint : public ::testing::Test {
 protected:
  void save(int level) {
    manifest_ = testing::tiny_llama_manifest(3, 3);
    data_ = std::make_unique<FixtureData>(manifest_);
    CheckpointOptions options;
    options.compression_level = level;
    ASSERT_OK(save_checkpoint(dir_.path(), "t", manifest_, data_->ranks(), options));
  }
  std::string rank_file(uint32_t r) const { return dir_.file("t/rank_0000" + std::to_string(r) + ".bin"); }
  nlohmann::json manifest_json() const {
    return nlohmann::json::parse(testing::read_text(dir_.file("t/manifest.json")));
  }
  // Replaces manifest.json and re-seals checksums.txt over it, so the manifest's own checks are
  // what a test reaches (checksum_coverage_test.cpp tests the seal).
  void write_manifest(const std::string& text) {
    testing::write_text(dir_.file("t/manifest.json"), text);
    ASSERT_OK_AND_ASSIGN(const std::string checksums, make_checksum_file(dir_.file("t"), 3));
    testing::write_text(dir_.file("t/checksums.txt"), checksums);
  }

  // verify's error, which must name `file` and contain every part.
  void expect_verify_fails(ErrorCode code, const std::string& file, const std::vector<std::string>& parts) {
    const Status s = verify_checkpoint(dir_.path()).status();
    EXPECT_ERROR(s, code, file);
    for (const auto& part : parts) EXPECT_ERROR(s, code, part);
  }

  // The loader's error when reading every partition of rank `r`.
  Status load_rank(uint32_t r) {
    auto reader = CheckpointReader::open(dir_.path());
    if (!reader.ok()) return reader.status();
    for (size_t g = 0; g < manifest_.groups.size(); ++g) {
      for (size_t s = 0; s < manifest_.groups[g].states.size(); ++s) {
        std::vector<float> out(partition_numel(manifest_.groups[g], 3, 3, 2));
        TZ_RETURN_IF_ERROR((*reader)->read_partition(g, s, 3, r, std::as_writable_bytes(std::span(out))));
      }
    }
    return {};
  }

  std::mt19937 rng_{20261129};
  ScratchDir dir_;
  CheckpointManifest manifest_;
  std::unique_ptr<FixtureData> data_;
};

TEST_F(CorruptEngineCheckpoint, MissingRankFile) {
  save(0);
  const uint32_t r = rng_() % 3;
  std::filesystem::remove(rank_file(r));
  expect_verify_fails(ErrorCode::kNotFound, rank_file(r), {"missing rank file", "world size 3"});
  Status s = load_rank(r);
  EXPECT_NE(s.message().find("missing rank file"), std::string::npos) << s.message();
}

TEST_F(CorruptEngineCheckpoint, TruncatedRankFile) {
  save(0);
  const uint32_t r = rng_() % 3;
  auto bytes = testing::read_file(rank_file(r));
  bytes.resize(bytes.size() - 1 - rng_() % 16);
  testing::write_file(rank_file(r), bytes);
  expect_verify_fails(ErrorCode::kCorrupt, rank_file(r), {"truncated or was replaced"});
  Status s = load_rank(r);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.message();
}

TEST_F(CorruptEngineCheckpoint, ChecksumMismatch) {
  save(0);
  const uint32_t r = rng_() % 3;
  auto bytes = testing::read_file(rank_file(r));
  bytes[rng_() % bytes.size()] ^= 0x40;
  testing::write_file(rank_file(r), bytes);
  expect_verify_fails(ErrorCode::kCorrupt, rank_file(r), {"checksum mismatch"});
  Status s = load_rank(r);
  EXPECT_NE(s.message().find("checksum mismatch"), std::string::npos) << s.message();
}

TEST_F(CorruptEngineCheckpoint, ZstdFrameDamage) {
  save(3);
  const uint32_t r = rng_() % 3;
  std::vector<uint64_t> group_offsets;  // sections the loader reads for this rank
  const nlohmann::json manifest = manifest_json();
  for (const auto& section : manifest["files"][r]["sections"]) {
    if (!section["replicated"].get<bool>()) group_offsets.push_back(section["offset"].get<uint64_t>());
  }
  const uint64_t offset = group_offsets[rng_() % group_offsets.size()];
  auto bytes = testing::read_file(rank_file(r));
  bytes[offset] ^= 0xff;  // the frame's magic number
  testing::write_file(rank_file(r), bytes);
  // verify reports the whole-file checksum first; the loader, which decodes, names the frame.
  expect_verify_fails(ErrorCode::kCorrupt, rank_file(r), {"checksum mismatch"});
  Status s = load_rank(r);
  EXPECT_EQ(s.code(), ErrorCode::kCorrupt);
  EXPECT_NE(s.message().find("zstd frame damaged"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(rank_file(r)), std::string::npos) << s.message();
}

TEST_F(CorruptEngineCheckpoint, WrongWorldSize) {
  save(0);
  nlohmann::json m = manifest_json();
  m["world_size"] = 4;
  write_manifest(m.dump());
  expect_verify_fails(ErrorCode::kCorrupt, dir_.file("t/manifest.json"),
                      {"manifest lists 3 rank files but world size 4"});
  m["world_size"] = 2;
  write_manifest(m.dump());
  expect_verify_fails(ErrorCode::kCorrupt, dir_.file("t/manifest.json"), {"world size 2"});
}

TEST_F(CorruptEngineCheckpoint, SectionSizeDisagreesWithTheLayout) {
  save(0);
  nlohmann::json m = manifest_json();
  auto& shape = m["groups"][0]["params"][0]["shape"];
  shape[0] = shape[0].get<int64_t>() + 1;  // a tensor grew: partitions no longer match
  write_manifest(m.dump());
  expect_verify_fails(ErrorCode::kCorrupt, dir_.file("t/manifest.json"), {"the layout needs"});
}

TEST_F(CorruptEngineCheckpoint, DamagedManifestAndLatest) {
  save(0);
  write_manifest("{\"format\": \"tierzero-checkpoint\", ");
  expect_verify_fails(ErrorCode::kCorrupt, dir_.file("t/manifest.json"), {"not valid JSON"});
  testing::write_text(dir_.file("latest"), "nope");  // disagrees with latest.xxh3
  expect_verify_fails(ErrorCode::kCorrupt, dir_.file("latest.xxh3"),
                      {dir_.file("latest") + " holds 'nope'", "the latest checkpoint is 't'", "pass --tag"});
  std::filesystem::remove(dir_.file("latest.xxh3"));  // as a checkpoint from before latest.xxh3
  expect_verify_fails(ErrorCode::kNotFound, dir_.file("nope/manifest.json"), {"is missing"});
}

}  // namespace
}  // namespace tierzero::checkpoint
