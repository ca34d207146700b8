// Integer fields of the engine manifest and rank records refuse JSON floats: nlohmann converts a float
// to an integer type with a plain cast, undefined for 3.4e91 (found by fuzz_engine_manifest).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "checkpoint/engine_format/internal/manifest_io.h"
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

TEST(ManifestFields, TheSameRecordWithAnIntegerIsRead) {
  ASSERT_OK_AND_ASSIGN(const RankFileRecord record, parse_rank_record(rank_record(342), "rank_00000.json"));
  ASSERT_EQ(record.sections.size(), 1u);
  EXPECT_EQ(record.sections[0].stored_bytes, 342u);
}

}  // namespace
}  // namespace tierzero::checkpoint
