// Each sync of the commit protocol matters: with any single sync site removed
// (checkpoint/storage/testing/skip_sync.h), some crash scenario finds a checkpoint lost or a
// partial output that looks complete. Prints the table kept in benchmarks/RELIABILITY.md. The
// export-only sites (moved-data, moved-last) are shown by tests/engine/zero/export_crash_test.cpp.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "checkpoint/storage/testing/skip_sync.h"
#include "crash_scenarios.h"

namespace tierzero::checkpoint {
namespace {

struct Scenario {
  const char* name;
  std::function<fs::testing::CrashReport(const std::string&)> run;
};

TEST(SyncSites, RemovingAnySingleSyncMakesACrashTestFail) {
  const std::vector<Scenario> scenarios = {
      {"CrashSimulation.SavingOverACheckpointNeverLosesIt", testing::crash_saving_over_a_checkpoint},
      {"CrashSimulation.TheFirstSaveIsAbsentOrComplete", testing::crash_first_save},
      {"CrashSimulation.ConvertOutputIsAbsentOrComplete", testing::crash_converting},
  };
  for (const SyncSite site : kAllSyncSites) {
    if (site == SyncSite::kMovedData || site == SyncSite::kMovedLast) continue;  // export only
    std::string failing;
    std::string example;
    {
      checkpoint::testing::ScopedSkipSync skip(site);
      for (const Scenario& s : scenarios) {
        fs::testing::ScratchRoot root;
        const fs::testing::CrashReport report = s.run(root.path());
        if (report.problems.empty()) continue;
        failing += (failing.empty() ? "" : ", ") + std::string(s.name);
        if (example.empty()) example = report.problems.front();
      }
    }
    std::printf("| %s | %s |\n    e.g. %s\n", sync_site_name(site), failing.c_str(), example.c_str());
    EXPECT_FALSE(failing.empty()) << "without the " << sync_site_name(site) << " sync every crash test still passes";
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
