// Integer fields of the engine manifest and rank records refuse JSON floats and values past their
// type: nlohmann converts a float to an integer type with a plain cast, undefined for 3.4e91, and an
// integer to a narrower type modulo 2^n (found by fuzz_engine_manifest).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/manifest_io.h"
#include "checkpoint_fixture.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

// A rank record as a save writes it, with `stored_bytes` of its one section replaced.
nlohmann::json rank_record(const nlohmann::json& stored_bytes) {
  nlohmann::json record = nlohmann::json::parse(R"({"bytes": 6847, "file": "rank_00000.bin",
    "layout_hash": "4024061fce40ac45", "rank": 0, "rank_state": null, "xxh3": "0123456789abcdef",
    "sections": [{"compression": "zstd", "group": 0, "index": 0, "offset": 0, "raw_bytes": 3680,
                  "replicated": false, "state": 0, "stored_bytes": 342, "xxh3": "0123456789abcdef"}]})");
  record["sections"][0]["stored_bytes"] = stored_bytes;
  return record;
}

TEST(ManifestFields, AFloatWhereAnIntegerBelongsIsRefusedNamingTheField) {
  EXPECT_ERROR(parse_rank_record(rank_record(3.42033e+91), "rank_00000.json"), ErrorCode::kCorrupt, "stored_bytes");
  EXPECT_ERROR(parse_rank_record(rank_record(342.5), "rank_00000.json"), ErrorCode::kCorrupt, "stored_bytes");
}

// Found by a 16-core fuzz run: a float inside an integer array (a tensor's shape), and an integer
// past its field's type (a 32-bit field read modulo 2^32 would be another, valid-looking, value).
TEST(ManifestFields, ShapesAndNarrowFieldsRefuseWhatTheirTypeCannotHold) {
  nlohmann::json record = rank_record(342);
  record["rank"] = 4294967297LL;  // 2^32 + 1: read as rank 1 by a plain conversion
  EXPECT_ERROR(parse_rank_record(record, "rank_00000.json"), ErrorCode::kCorrupt, "rank");
  record = rank_record(342);
  record["sections"][0]["group"] = -1;
  EXPECT_ERROR(parse_rank_record(record, "rank_00000.json"), ErrorCode::kCorrupt, "group");
  EXPECT_ERROR(parse_rank_record(rank_record(-342), "rank_00000.json"), ErrorCode::kCorrupt, "stored_bytes");
}

// The manifest.json text of a small checkpoint as save_checkpoint writes it, with the first
// parameter's shape replaced by `shape`.
std::string manifest_with_shape(const nlohmann::json& shape) {
  const CheckpointManifest manifest = testing::tiny_llama_manifest(1, 1);
  testing::FixtureData data(manifest);
  testing::ScratchDir dir;
  EXPECT_OK(save_checkpoint(dir.path(), "step1", manifest, data.ranks()));
  nlohmann::json j = nlohmann::json::parse(testing::read_text(dir.path() + "/step1/manifest.json"));
  j["groups"][0]["params"][0]["shape"] = shape;
  return j.dump();
}

TEST(ManifestFields, AShapeHoldsIntegersOnly) {
  const nlohmann::json real_shape = testing::tiny_llama_manifest(1, 1).groups[0].params[0].shape;
  ASSERT_OK(parse_stored_manifest(manifest_with_shape(real_shape), "manifest.json"));
  EXPECT_ERROR(parse_stored_manifest(manifest_with_shape({2, 2.5}), "manifest.json"), ErrorCode::kCorrupt, "shape");
  EXPECT_ERROR(parse_stored_manifest(manifest_with_shape({2, 2.2e99}), "manifest.json"), ErrorCode::kCorrupt, "shape");
  EXPECT_ERROR(parse_stored_manifest(manifest_with_shape(7), "manifest.json"), ErrorCode::kCorrupt, "shape");
}

TEST(ManifestFields, TheSameRecordWithAnIntegerIsRead) {
  ASSERT_OK_AND_ASSIGN(const RankFileRecord record, parse_rank_record(rank_record(342), "rank_00000.json"));
  ASSERT_EQ(record.sections.size(), 1u);
  EXPECT_EQ(record.sections[0].stored_bytes, 342u);
}

}  // namespace
}  // namespace tierzero::checkpoint
