// What this host lets a process pin, read before a pinned pool is allocated, so an impossible budget
// fails in the first second with the numbers (asked, MemAvailable, RLIMIT_MEMLOCK) and the fix.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"

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

}  // namespace tierzero::offload
