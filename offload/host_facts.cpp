#include "offload/internal/host_facts.h"

#include <sys/resource.h>

#include <fstream>
#include <limits>
#include <string>

#include "common/common.h"

namespace tierzero::offload {
namespace {

constexpr int kCapIpcLock = 14;

// The text after `key` on the first line of `path` that starts with it; kUnsupported when none does.
Result<std::string> proc_field(const char* path, const std::string& key) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  return unsupported(key + " not found in " + path);
}

}  // namespace

Result<HostFacts> read_host_facts() {
  HostFacts facts;
  TZ_ASSIGN_OR_RETURN(const std::string available, proc_field("/proc/meminfo", "MemAvailable:"));
  facts.mem_available = std::stoull(available) * 1024;  // kB
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return errno_status(errno, "getrlimit(RLIMIT_MEMLOCK)");
  facts.memlock_limit = limit.rlim_cur == RLIM_INFINITY ? std::numeric_limits<uint64_t>::max() : limit.rlim_cur;
  const Result<std::string> caps = proc_field("/proc/self/status", "CapEff:");
  facts.can_lock_unlimited = caps.ok() && ((std::stoull(*caps, nullptr, 16) >> kCapIpcLock) & 1);
  return facts;
}

std::string describe_memlock(const HostFacts& facts) {
  if (facts.memlock_limit == std::numeric_limits<uint64_t>::max()) return "unlimited";
  return format_bytes(facts.memlock_limit) + (facts.can_lock_unlimited ? " (not binding: CAP_IPC_LOCK)" : "");
}

}  // namespace tierzero::offload
