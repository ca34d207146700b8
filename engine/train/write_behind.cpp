#include "engine/train/internal/write_behind.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/common.h"
#include "engine/config/ds_config.h"

namespace tierzero::engine::trainer {

WriteBehind choose_write_behind(int64_t configured, uint64_t rank_checkpoint_bytes, uint64_t mem_available,
                                int ranks) {
  if (configured != kWriteBehindAuto)
    return {static_cast<uint64_t>(configured), "tierzero.checkpoint.write_behind"};
  const uint64_t spare = mem_available / 2 / static_cast<uint64_t>(std::max(ranks, 1));
  if (rank_checkpoint_bytes <= spare)
    return {rank_checkpoint_bytes, "auto: the rank's checkpoint, " + format_bytes(rank_checkpoint_bytes)};
  return {spare, "auto: half of MemAvailable " + format_bytes(mem_available) +
                     (ranks > 1 ? " over " + std::to_string(ranks) + " ranks" : "") + ", less than the rank's checkpoint " +
                     format_bytes(rank_checkpoint_bytes)};
}

uint64_t mem_available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace tierzero::engine::trainer
