// Start-up checks of the tier budgets against the machine, so an impossible configuration fails
// in the first second with the numbers (asked, available, RLIMIT_MEMLOCK, free disk) and the fix,
// not an hour into training.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"
#include "offload/internal/device_memory.h"
#include "offload/tier_manager.h"

namespace tierzero::offload {

struct HostFacts {
  uint64_t mem_available = 0;       // /proc/meminfo MemAvailable
  uint64_t memlock_limit = 0;       // RLIMIT_MEMLOCK soft limit; UINT64_MAX when unlimited
  bool can_lock_unlimited = false;  // CAP_IPC_LOCK: the limit does not apply
};

// Reads the facts above for this process.
Result<HostFacts> read_host_facts();

// "unlimited" or a byte size.
std::string describe_memlock(const HostFacts& facts);

// Checks knobs (chunk, depth, threads, stripe) and the pinned and GPU budgets against `facts`
// and `device`; the staging buffers (`staging_bytes`) must fit in the pinned budget.
Status check_budgets(const TierBudgets& budgets, uint64_t staging_bytes, const HostFacts& facts, DeviceMemory& device);

}  // namespace tierzero::offload
