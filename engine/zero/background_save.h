// A save_engine_checkpoint (zero_engine.h) whose bytes stream out while training goes on
// (docs/design.md, "Saves that overlap training"). start() begins checkpoint
// "global_step<iteration>" and returns with the state being written by a thread of its own; the steps
// after it run meanwhile, the offloaded optimizer holding its update of each element until the save
// has copied it out (internal/save_progress.h), so the files are those save_engine_checkpoint would
// have written at start(), byte for byte. finish() waits for the last byte and commits: the
// checkpoint is durable, and DIR/latest names it, only when finish() returns ok; until then the
// previous one stays DIR/latest. A write error (a full disk) is returned by finish(). Both are
// collectives. An optimizer that cannot hold its steps (on the device) is saved before start()
// returns.
#pragma once

#include <memory>
#include <string>

#include "common/common.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine {

class BackgroundSave {
 public:
  // Begins the save (save_engine_checkpoint's arguments); `engine` outlives it.
  static Result<std::unique_ptr<BackgroundSave>> start(const std::string& dir, ZeroEngine& engine,
                                                       const CheckpointExtras& extras, int compression_level = 0);
  // Not finished: waits for the writer and commits nothing (what it staged, DIR/TAG.partial, is
  // removed by the next save or the next run's start).
  virtual ~BackgroundSave() = default;
  // Waits for the write, then commits. Call once.
  virtual Status finish() = 0;
  // Seconds the optimizer's steps waited for the save to read the state they update.
  virtual double held_seconds() const = 0;
};

}  // namespace tierzero::engine
