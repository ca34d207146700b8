// Power loss at every file-system step of checkpoint save and convert (fs::testing::FaultInjectionFs:
// unsynced writes, renames and directory entries dropped, or any one unsynced directory change
// kept): the previous checkpoint always loads and verifies, and no partial output looks complete.
#include <gtest/gtest.h>

#include "crash_scenarios.h"

namespace tierzero::checkpoint {
namespace {

void expect_no_problems(const fs::testing::CrashReport& report) {
  std::printf("  %zu steps, %zu crash points, %zu crash images checked\n", report.steps, report.crash_points,
              report.images);
  EXPECT_GT(report.steps, 0u);
  for (const std::string& p : report.problems) ADD_FAILURE() << p;
}

TEST(CrashSimulation, SavingOverACheckpointNeverLosesIt) {
  fs::testing::ScratchRoot root;
  expect_no_problems(testing::crash_saving_over_a_checkpoint(root.path()));
}

TEST(CrashSimulation, TheFirstSaveIsAbsentOrComplete) {
  fs::testing::ScratchRoot root;
  expect_no_problems(testing::crash_first_save(root.path()));
}

TEST(CrashSimulation, ConvertOutputIsAbsentOrComplete) {
  fs::testing::ScratchRoot root;
  expect_no_problems(testing::crash_converting(root.path()));
}

}  // namespace
}  // namespace tierzero::checkpoint
