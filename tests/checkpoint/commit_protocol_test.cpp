// The commit protocol fails at each step in turn (a FaultHook), and after every failure the
// previous checkpoint still loads and verifies; a retry then commits the new one.
#include <gtest/gtest.h>

#include <vector>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint_fixture.h"
#include "test_util.h"

namespace tierzero::checkpoint {
namespace {

using testing::FixtureData;
using testing::ScratchDir;

struct Step {
  FsStep step;
  std::string path;
};

// Loads the latest checkpoint and checks its step and all of rank 0's master weights.
void expect_loads(const std::string& dir, int64_t step, const FixtureData& data) {
  auto reader = CheckpointReader::open(dir);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  EXPECT_EQ((*reader)->manifest().step, step);
  const CheckpointManifest& m = (*reader)->manifest();
  std::vector<float> out(partition_numel(m.groups[0], m.zero_stage, m.world_size, m.alignment));
  ASSERT_TRUE((*reader)->read_partition(0, 0, m.world_size, 0, std::as_writable_bytes(std::span(out))).ok());
  EXPECT_EQ(out, data.partition(0, 0, m.world_size, 0));
  EXPECT_TRUE(verify_checkpoint(dir).ok());
}

TEST(CommitProtocol, APreviousCheckpointSurvivesAFailureAtEveryStep) {
  CheckpointManifest first = testing::tiny_llama_manifest(2, 2);
  first.step = 100;
  CheckpointManifest second = first;
  second.step = 200;
  FixtureData first_data(first);
  FixtureData second_data(second);

  // A clean run records every step of the protocol.
  std::vector<Step> steps;
  {
    ScratchDir dir;
    ASSERT_TRUE(save_checkpoint(dir.path(), "step100", first, first_data.ranks()).ok());
    CheckpointOptions recording;
    recording.fault_hook = [&](FsStep step, const std::string& path) {
      steps.push_back({step, path});
      return Status();
    };
    ASSERT_TRUE(save_checkpoint(dir.path(), "step200", second, second_data.ranks(), recording).ok());
  }
  ASSERT_GE(steps.size(), 15u);
  bool saw_rename_of_latest = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE(std::string("failing step ") + std::to_string(k) + " " + fs_step_name(steps[k].step) + " " +
                 steps[k].path);
    ScratchDir dir;
    ASSERT_TRUE(save_checkpoint(dir.path(), "step100", first, first_data.ranks()).ok());
    size_t seen = 0;
    CheckpointOptions failing;
    failing.fault_hook = [&](FsStep, const std::string&) {
      return seen++ == k ? io_error("injected fault") : Status();
    };
    Status s = save_checkpoint(dir.path(), "step200", second, second_data.ranks(), failing);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("injected fault"), std::string::npos);
    // Only a failure after `latest` was renamed (its directory fsync) may expose the new checkpoint.
    const bool latest_renamed = saw_rename_of_latest;
    if (steps[k].step == FsStep::kRename && steps[k].path.ends_with("/latest")) saw_rename_of_latest = true;
    expect_loads(dir.path(), latest_renamed ? 200 : 100, latest_renamed ? second_data : first_data);
    // The crashed save leaves nothing that blocks a retry.
    if (!latest_renamed) {
      ASSERT_TRUE(save_checkpoint(dir.path(), "step200", second, second_data.ranks()).ok());
      expect_loads(dir.path(), 200, second_data);
    }
  }
  EXPECT_TRUE(saw_rename_of_latest);
}

}  // namespace
}  // namespace tierzero::checkpoint
