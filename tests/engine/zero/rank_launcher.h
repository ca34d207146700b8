// Runs a test scenario on W ranks: starts W zero_rank_worker processes (RANK, WORLD_SIZE and a
// FileStore in a fresh scratch dir) through tests/support's SpawnedRanks, waits for all (killing
// them after a deadline) and reports.
#pragma once

#include <string>

#include "scenario.h"
#include "tests/support/scratch_dir.h"

namespace tierzero::engine::testing {

// A fresh directory under $TMPDIR (or /tmp) named tierzero_zero-XXXXXX (tests/support/scratch_dir.h;
// prefer a test_support::ScratchDir, which removes itself).
inline std::string make_temp_dir() { return test_support::make_scratch_dir("tierzero_zero"); }
// Removes `path` and everything below it (test_support::remove_tree).
inline void remove_tree(const std::string& path) { test_support::remove_tree(path); }

// Empty when every rank exited 0; otherwise each failing rank's exit status and output. When a rank
// fails to form the process group (Comm::create's kGroupNotFormed), the other ranks are killed and
// all launched again over a fresh store, up to SpawnedRanks::kLaunchAttempts times, each failure on
// stderr.
std::string run_ranks(const Scenario& scenario, double loss_rtol, double param_atol, int timeout_seconds = 240);

}  // namespace tierzero::engine::testing
