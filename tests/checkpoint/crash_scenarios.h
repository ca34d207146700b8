// The checkpoint-layer crash scenarios (fs::testing::crash_at_every_step), shared by the crash
// tests and the sync-site tests: each returns what is wrong after a power loss at every step.
#pragma once

#include <string>

#include "fs/testing/crash_harness.h"

namespace tierzero::checkpoint::testing {

// DIR holds step100; saving step200 crashes. Every image: step100 loads and verifies by tag;
// DIR/latest names a complete checkpoint (100, or 200 when the save had returned: 200 only).
fs::testing::CrashReport crash_saving_over_a_checkpoint(const std::string& root);
// The same with a compact step200 (encoded states, compact_manifest, in pieces of 256 elements):
// every image's latest is the
// fp32 step100 or the complete compact step200, whose master decodes to what was split.
fs::testing::CrashReport crash_saving_compact_over_a_checkpoint(const std::string& root);
// DIR does not exist; the first save (step100) crashes. Every image: no DIR/latest, or one that
// names a complete checkpoint; once the save returned, it must.
fs::testing::CrashReport crash_first_save(const std::string& root);
// A checkpoint converts to OUT (several shards and an index). Every image: OUT is absent or holds
// exactly the files of a clean conversion; once convert returned, it must hold them.
fs::testing::CrashReport crash_converting(const std::string& root);

}  // namespace tierzero::checkpoint::testing
