// Private: periodic saves keep the newest K engine checkpoints, and what unfinished saves left is
// removed (checkpoint_rotation.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"

namespace tierzero::engine::trainer {

// The iterations of the published checkpoints under `dir` (directories named global_stepN, no
// suffix), ascending.
std::vector<int64_t> saved_iterations(const std::string& dir);

// Retires every global_stepN under `dir` but the newest `keep_last` and the one DIR/latest names:
// each is renamed to global_stepN.removing and the directory synced, so from here on it is no
// checkpoint, and a crash never leaves a partial directory under a checkpoint's name. Fast (no file
// is removed); remove_retired_checkpoints then removes their files. Call it only after the newest
// checkpoint is durable (save_engine_checkpoint returned ok). Errors name the directory.
Status retire_old_checkpoints(const std::string& dir, int64_t keep_last);

// Removes every global_stepN.removing under `dir`: what retire_old_checkpoints renamed, or what a
// rotation killed midway left (so a killed rotation leaks no disk space). Slow where the file
// system discards freed blocks as it unlinks (ext4 `-o discard`: ~0.5 s a GiB on the CPU box), so
// the trainer runs it beside the steps. Errors name the path.
Status remove_retired_checkpoints(const std::string& dir);

// The most checkpoints a run's `saves` new ones add at once to a directory holding `existing`: each
// is written while the newest earlier ones stay, and with `keep_last` > 0 the rotation then trims the
// directory to the newest keep_last (so a run with keep_last 1 needs room for 2 while it saves). With
// keep_last <= 0 nothing is removed: every save stays.
int64_t checkpoints_added_at_once(int64_t existing, int64_t saves, int64_t keep_last);

// The tag DIR/latest names (the newest committed checkpoint), or "" when there is none.
std::string latest_tag(const std::string& dir);

// Removes every NAME.partial directly under `dir`, directory or file: what a save that failed or was
// killed had staged (a checkpoint tag, a `latest` pointer, the 16-bit model). Readers never follow a
// *.partial, so none is ever a committed checkpoint. Returns the paths removed, in name order; a
// missing `dir` has none. Errors name the path that could not be removed.
Result<std::vector<std::string>> remove_unfinished_saves(const std::string& dir);

}  // namespace tierzero::engine::trainer
