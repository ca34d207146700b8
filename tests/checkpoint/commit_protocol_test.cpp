// The commit protocol fails at each step in turn (fs::testing::FaultInjectionFs), and after every
// failure the previous checkpoint still loads and verifies; a retry then commits the new one.
#include <gtest/gtest.h>

#include <vector>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "checkpoint_fixture.h"
#include "fs/testing/crash_harness.h"
#include "fs/testing/default_override.h"
#include "fs/testing/fault_injection_fs.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::FixtureData;

// Loads the latest checkpoint and checks its step and all of rank 0's master weights.
void expect_loads(const std::string& dir, int64_t step, const FixtureData& data) {
  auto reader = CheckpointReader::open(dir);
  ASSERT_OK(reader);
  EXPECT_EQ((*reader)->manifest().step, step);
  const CheckpointManifest& m = (*reader)->manifest();
  std::vector<float> out(partition_numel(m.groups[0], m.zero_stage, m.world_size, m.alignment));
  ASSERT_OK((*reader)->read_partition(0, 0, m.world_size, 0, std::as_writable_bytes(std::span(out))));
  EXPECT_EQ(out, data.partition(0, 0, m.world_size, 0));
  const auto verified = verify_checkpoint(dir);
  EXPECT_OK(verified);
}

TEST(CommitProtocol, APreviousCheckpointSurvivesAFailureAtEveryStep) {
  CheckpointManifest first = testing::tiny_llama_manifest(2, 2);
  first.step = 100;
  CheckpointManifest second = first;
  second.step = 200;
  FixtureData first_data(first);
  FixtureData second_data(second);
  fs::FileSystem& real = fs::default_file_system();

  // A clean run records every step of the protocol.
  std::vector<fs::testing::FsStep> steps;
  {
    fs::testing::ScratchRoot dir;
    ASSERT_OK(save_checkpoint(dir.path(), "step100", first, first_data.ranks()));
    fs::testing::FaultInjectionFs recording(real, dir.path());
    fs::testing::ScopedDefaultFileSystem use(recording);
    ASSERT_OK(save_checkpoint(dir.path(), "step200", second, second_data.ranks()));
    steps = recording.steps();
  }
  ASSERT_GE(steps.size(), 15u);
  bool saw_rename_of_latest = false;
  for (size_t k = 0; k < steps.size(); ++k) {
    SCOPED_TRACE("failing step " + std::to_string(k) + " " + steps[k].op + " " + steps[k].path);
    fs::testing::ScratchRoot dir;
    ASSERT_OK(save_checkpoint(dir.path(), "step100", first, first_data.ranks()));
    fs::testing::FaultInjectionFs failing(real, dir.path());
    failing.fail_step(k);
    Status s;
    {
      fs::testing::ScopedDefaultFileSystem use(failing);
      s = save_checkpoint(dir.path(), "step200", second, second_data.ranks());
    }
    ASSERT_ERROR(s, ErrorCode::kIo, "injected fault");
    // Only a failure after the pointer moved — latest.xxh3 renamed, which readers follow (then
    // `latest`) — may expose the new checkpoint.
    const bool latest_renamed = saw_rename_of_latest;
    if (steps[k].op == "rename" && steps[k].path.ends_with("/latest.xxh3")) saw_rename_of_latest = true;
    expect_loads(dir.path(), latest_renamed ? 200 : 100, latest_renamed ? second_data : first_data);
    // The crashed save leaves nothing that blocks a retry.
    if (!latest_renamed) {
      ASSERT_OK(save_checkpoint(dir.path(), "step200", second, second_data.ranks()));
      expect_loads(dir.path(), 200, second_data);
    }
  }
  EXPECT_TRUE(saw_rename_of_latest);
}

}  // namespace
}  // namespace tierzero::checkpoint
