#include "offload/internal/host_facts.h"

#include <sys/resource.h>

#include <fstream>
#include <limits>
#include <sstream>

#include "common/common.h"

namespace tierzero::offload {
namespace {

constexpr int kCapIpcLock = 14;

bool has_cap_ipc_lock() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    const uint64_t caps = std::stoull(line.substr(7), nullptr, 16);
    return (caps >> kCapIpcLock) & 1;
  }
  return false;
}

// MemAvailable from /proc/meminfo in bytes.
Result<uint64_t> host_memory_available() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return unsupported("MemAvailable not found in /proc/meminfo");
}

}  // namespace

Result<HostFacts> read_host_facts() {
  HostFacts facts;
  TZ_ASSIGN_OR_RETURN(facts.mem_available, host_memory_available());
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return errno_status(errno, "getrlimit(RLIMIT_MEMLOCK)");
  facts.memlock_limit = limit.rlim_cur == RLIM_INFINITY ? std::numeric_limits<uint64_t>::max() : limit.rlim_cur;
  facts.can_lock_unlimited = has_cap_ipc_lock();
  return facts;
}

std::string describe_memlock(const HostFacts& facts) {
  if (facts.memlock_limit == std::numeric_limits<uint64_t>::max()) return "unlimited";
  return format_bytes(facts.memlock_limit) + (facts.can_lock_unlimited ? " (not binding: CAP_IPC_LOCK)" : "");
}

}  // namespace tierzero::offload
