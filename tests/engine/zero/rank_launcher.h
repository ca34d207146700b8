// Runs a test scenario on W ranks: starts W zero_rank_worker processes (RANK, WORLD_SIZE and a
// FileStore in a fresh temp dir), waits for all (killing them after a deadline) and reports.
#pragma once

#include <string>

#include "scenario.h"

namespace tierzero::engine::testing {

// Makes a fresh directory under $TMPDIR (or /tmp) named tierzero_zero_XXXXXX.
std::string make_temp_dir();
// Removes `path` and everything below it. (Not std::filesystem::remove_all: libtorch.so exports its
// own copy, which the dynamic linker may bind instead, and it crashes.)
void remove_tree(const std::string& path);

// Empty when every rank exited 0; otherwise each failing rank's exit status and stderr.
std::string run_ranks(const Scenario& scenario, double loss_rtol, double param_atol, int timeout_seconds = 240);

}  // namespace tierzero::engine::testing
