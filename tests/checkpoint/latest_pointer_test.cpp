// DIR/latest under a checksum (DIR/latest.xxh3, checkpoint/engine_format/internal/latest_pointer.h):
// a flipped bit in either file never sends verify, resume or convert to another checkpoint that
// exists; a save stopped between the two files still reads; checkpoints without latest.xxh3 read
// as before.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint/engine_format/internal/latest_pointer.h"
#include "checkpoint_fixture.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::FixtureData;
using testing::ScratchDir;

// A model config that says which checkpoint it came from: what the converter's source reads.
std::string config_at(int64_t step) { return R"({"model_type": "llama", "saved_at": )" + std::to_string(step) + "}"; }

CheckpointManifest manifest_at(int64_t step) {
  CheckpointManifest m = testing::tiny_llama_manifest(2, 2);
  m.step = step;
  m.model_config_json = config_at(step);
  return m;
}

// Two checkpoints in one directory, step3 then step7: `latest` is "step7", and one flipped bit
// ('7' is 0x37, '3' is 0x33) makes it name the other, complete one.
class LatestPointer : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const int64_t step : {3, 7}) {
      const CheckpointManifest m = manifest_at(step);
      const FixtureData data(m);
      ASSERT_OK(save_checkpoint(dir_.path(), "step" + std::to_string(step), m, data.ranks()));
    }
  }

  // The step each reader lands on (-1: it refused).
  struct Landed {
    int64_t verify = -1, resume = -1, convert = -1;
  };
  Landed readers_land_on() const {
    Landed landed;
    if (const auto report = verify_checkpoint(dir_.path()); report.ok()) {
      landed.verify = report->path.ends_with("/step7") ? 7 : report->path.ends_with("/step3") ? 3 : 0;
    }
    if (const auto reader = CheckpointReader::open(dir_.path()); reader.ok())
      landed.resume = (*reader)->manifest().step;
    if (const auto source = open_engine_checkpoint_source(dir_.path()); source.ok()) {
      landed.convert = (*source)->model_config_json() == config_at(7) ? 7 : 3;
    }
    return landed;
  }

  ScratchDir dir_;
};

TEST_F(LatestPointer, SaveWritesTheTagAndThePreviousOne) {
  const auto record = parse_latest_record(testing::read_text(dir_.file("latest.xxh3")), "latest.xxh3");
  ASSERT_OK(record);
  EXPECT_EQ(*record, (LatestRecord{.tag = "step7", .previous = "step3"}));
  EXPECT_EQ(testing::read_text(dir_.file("latest")), "step7");
  const Landed landed = readers_land_on();
  EXPECT_EQ(landed.verify, 7);
  EXPECT_EQ(landed.resume, 7);
  EXPECT_EQ(landed.convert, 7);
}

// The hole latest.xxh3 closes: without it, the one-bit flip step7 -> step3 reads the older
// checkpoint as if it were the latest.
TEST_F(LatestPointer, WithoutTheChecksumAFlipReadsAnotherCheckpoint) {
  std::filesystem::remove(dir_.file("latest.xxh3"));
  testing::write_text(dir_.file("latest"), "step3");
  EXPECT_EQ(readers_land_on().resume, 3);
}

// Every bit of both files flipped in turn: no reader ever lands on step3.
TEST_F(LatestPointer, NoFlippedBitReadsAnotherCheckpoint) {
  size_t flips = 0, refused = 0, read_latest = 0;
  for (const char* name : {"latest", "latest.xxh3"}) {
    const std::string path = dir_.file(name);
    const std::vector<uint8_t> original = testing::read_file(path);
    for (size_t i = 0; i < original.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<uint8_t> flipped = original;
        flipped[i] ^= static_cast<uint8_t>(1u << bit);
        testing::write_file(path, flipped);
        const Landed landed = readers_land_on();
        const std::string where = std::string(name) + " byte " + std::to_string(i) + " bit " + std::to_string(bit);
        for (const int64_t step : {landed.verify, landed.resume, landed.convert}) {
          EXPECT_TRUE(step == -1 || step == 7) << where << ": a reader landed on step " << step;
        }
        EXPECT_TRUE(landed.verify == landed.resume && landed.resume == landed.convert) << where;
        ++flips;
        refused += landed.resume == -1;
        read_latest += landed.resume == 7;
      }
    }
    testing::write_file(path, original);
  }
  // In `latest` only the flip to the previous tag ('7' -> '3') is read, as step7; in
  // latest.xxh3 nothing is.
  EXPECT_EQ(read_latest, 1u);
  std::printf(
      "latest pointer: %zu single-bit flips over latest and latest.xxh3; %zu refused, %zu read step7, "
      "0 read step3\n",
      flips, refused, read_latest);
}

// A save stopped after latest.xxh3 moved to step7 and before `latest` did: step7 is complete
// (published before either pointer file), and it is what every reader opens.
TEST_F(LatestPointer, SaveStoppedBetweenTheTwoFilesReadsTheNewTag) {
  testing::write_text(dir_.file("latest"), "step3");
  const Landed landed = readers_land_on();
  EXPECT_EQ(landed.verify, 7);
  EXPECT_EQ(landed.resume, 7);
  EXPECT_EQ(landed.convert, 7);
}

TEST_F(LatestPointer, CompleteLatestFinishesTheStoppedMoveOnly) {
  const std::string record = testing::read_text(dir_.file("latest.xxh3"));
  ASSERT_OK(complete_latest(dir_.path()));  // the two agree: nothing changes
  EXPECT_EQ(testing::read_text(dir_.file("latest")), "step7");
  testing::write_text(dir_.file("latest"), "step3");  // stopped between the two files
  ASSERT_OK(complete_latest(dir_.path()));
  EXPECT_EQ(testing::read_text(dir_.file("latest")), "step7");
  EXPECT_EQ(testing::read_text(dir_.file("latest.xxh3")), record);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("latest.partial")));
  testing::write_text(dir_.file("latest"), "step1");  // not a stopped move: left for a person
  EXPECT_ERROR(complete_latest(dir_.path()), ErrorCode::kCorrupt, "pass --tag");
  EXPECT_EQ(testing::read_text(dir_.file("latest")), "step1");
}

// The next save after a stopped move records the tag readers were following (step7) as the
// previous one, not the older text `latest` still held: the directory ends as if nothing had
// stopped (found by scripts/kill_test.py: a resumed run's latest.xxh3 said 'previous step3').
TEST_F(LatestPointer, SaveAfterAStoppedMoveRecordsTheTagReadersFollowed) {
  testing::write_text(dir_.file("latest"), "step3");
  const CheckpointManifest m = manifest_at(9);
  ASSERT_OK(save_checkpoint(dir_.path(), "step9", m, FixtureData(m).ranks()));
  ASSERT_OK_AND_ASSIGN(const LatestRecord record,
                       parse_latest_record(testing::read_text(dir_.file("latest.xxh3")), "latest.xxh3"));
  EXPECT_EQ(record, (LatestRecord{.tag = "step9", .previous = "step7"}));
  EXPECT_EQ(testing::read_text(dir_.file("latest")), "step9");
}

TEST_F(LatestPointer, FirstSaveStoppedBeforeLatestReadsTheNewTag) {
  ScratchDir first;
  const CheckpointManifest m = manifest_at(3);
  ASSERT_OK(save_checkpoint(first.path(), "step3", m, FixtureData(m).ranks()));
  std::filesystem::remove(first.file("latest"));
  const auto reader = CheckpointReader::open(first.path());
  ASSERT_OK(reader);
  EXPECT_EQ((*reader)->manifest().step, 3);
}

TEST_F(LatestPointer, LatestEditedToAnotherTagIsRefusedNamingBoth) {
  const CheckpointManifest m = manifest_at(9);
  ASSERT_OK(save_checkpoint(dir_.path(), "step9", m, FixtureData(m).ranks()));
  testing::write_text(dir_.file("latest"), "step3");  // neither step9 nor its previous, step7
  EXPECT_ERROR(CheckpointReader::open(dir_.path()), ErrorCode::kCorrupt,
               "holds 'step3' but " + dir_.file("latest.xxh3") +
                   " (written with it) says the latest checkpoint is "
                   "'step9' (before it 'step7')");
  EXPECT_ERROR(verify_checkpoint(dir_.path()), ErrorCode::kCorrupt, "pass --tag");
  EXPECT_OK(CheckpointReader::open(dir_.path(), "step3"));
}

// Checkpoints from before latest.xxh3 (and directories a person set up) follow `latest` alone.
TEST_F(LatestPointer, WithoutTheChecksumFileLatestIsFollowed) {
  std::filesystem::remove(dir_.file("latest.xxh3"));
  EXPECT_EQ(readers_land_on().resume, 7);
  testing::write_text(dir_.file("latest"), "step3\n");
  EXPECT_EQ(readers_land_on().resume, 3);
}

TEST(LatestRecord, RejectsEveryMalformation) {
  for (const LatestRecord& record : {LatestRecord{"global_step8", ""}, LatestRecord{"global_step8", "global_step4"}}) {
    const std::string good = latest_record_text(record);
    ASSERT_OK_AND_ASSIGN(const LatestRecord parsed, parse_latest_record(good, "r"));
    EXPECT_EQ(parsed, record);
    for (const std::string& bad : {std::string(), good.substr(0, good.size() - 1), good + "\n", "x" + good,
                                   good.substr(good.find('\n') + 1), std::string(good).replace(4, 1, "Z")}) {
      EXPECT_ERROR(parse_latest_record(bad, "r"), ErrorCode::kCorrupt, "r is damaged") << bad;
    }
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
