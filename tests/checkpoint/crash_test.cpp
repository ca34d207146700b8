// Power loss at every file-system step of checkpoint save and convert (fs::testing::FaultInjectionFs:
// unsynced writes, renames and directory entries dropped, or any one unsynced directory change
// kept): the previous checkpoint always loads and verifies, and no partial output looks complete.
#include <gtest/gtest.h>

#include "crash_scenarios.h"
#include "tests/support/crash_report.h"

namespace tierzero::checkpoint {
namespace {

TEST(CrashSimulation, SavingOverACheckpointNeverLosesIt) {
  fs::testing::ScratchRoot root;
  test_support::expect_no_crash_problems(testing::crash_saving_over_a_checkpoint(root.path()));
}

TEST(CrashSimulation, SavingACompactCheckpointNeverLosesThePreviousOne) {
  fs::testing::ScratchRoot root;
  test_support::expect_no_crash_problems(testing::crash_saving_compact_over_a_checkpoint(root.path()));
}

TEST(CrashSimulation, TheFirstSaveIsAbsentOrComplete) {
  fs::testing::ScratchRoot root;
  test_support::expect_no_crash_problems(testing::crash_first_save(root.path()));
}

TEST(CrashSimulation, ConvertOutputIsAbsentOrComplete) {
  fs::testing::ScratchRoot root;
  test_support::expect_no_crash_problems(testing::crash_converting(root.path()));
}

}  // namespace
}  // namespace tierzero::checkpoint
