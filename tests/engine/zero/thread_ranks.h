// Ranks as threads of one process: a CPU Gloo group over an in-process store, one thread a rank,
// for tests that hold every rank's result in one place (export_test, estimate_equals_train_test).
// A real run has one group per process (rank_launcher.h runs those).
#pragma once

#include <functional>

#include "engine/comm/comm.h"

namespace tierzero::engine::testing {

// Runs `body(comm)` on `world` threads, each with its rank's Comm of one CPU Gloo group; returns
// when every thread has. The group is formed first, on all threads at once; if any rank fails to
// form it (Gloo's loopback connect failed so once on the CI box: "Connection closed by peer" inside
// connectFullMesh, in a test about bytes, not about Gloo), every rank's Comm is dropped and the group
// formed again over a fresh store, up to 3 times, each failure written to stderr. Throws when the group never
// formed (every rank's error in the message) or rethrows the lowest rank's exception from `body`.
// Turns c10d's flight recorder off for the process (TORCH_FR_BUFFER_SIZE=0; call it before the
// process forms any other group): it inserts each group's first entry into a std::map before taking
// its lock, so two groups' first collectives on two threads corrupted the map (a segfault, about 1
// run in 3 in export_test).
void run_thread_ranks(int world, const std::function<void(Comm&)>& body);

}  // namespace tierzero::engine::testing
