// Private: the host memory a run's periodic saves copy the state into ahead of the disk
// (tierzero.checkpoint.write_behind; docs/design.md, "Saves that overlap training").
#pragma once

#include <cstdint>
#include <string>

namespace tierzero::engine::trainer {

struct WriteBehind {
  uint64_t bytes = 0;  // asked of checkpoint::WriteBuffers::create (it holds at least 64 MiB)
  std::string why;     // "auto: the rank's checkpoint, 1.20 GB" / "tierzero.checkpoint.write_behind"
};

// `configured`: the key's bytes, or kWriteBehindAuto: the rank's checkpoint bytes
// (`rank_checkpoint_bytes`, the planner's), at most half of `mem_available` (MemAvailable once the
// engine is built) shared by the run's `ranks` (as if all on this host); the other half stays for
// the page cache and what the steps allocate.
WriteBehind choose_write_behind(int64_t configured, uint64_t rank_checkpoint_bytes, uint64_t mem_available,
                                int ranks);

// /proc/meminfo's MemAvailable in bytes; 0 where it cannot be read.
uint64_t mem_available_bytes();

}  // namespace tierzero::engine::trainer
