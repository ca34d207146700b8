#include "offload/internal/budget_check.h"

#include <sys/resource.h>

#include <fstream>
#include <limits>

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

Status check_budgets(const TierBudgets& b, uint64_t staging_bytes, const HostFacts& facts, DeviceMemory& device) {
  if (b.chunk_bytes < 4096 || b.chunk_bytes % 4096 != 0) {
    return invalid_argument("chunk_bytes " + std::to_string(b.chunk_bytes) +
                            " must be a multiple of 4096 (8 MiB is a good start)");
  }
  if (b.pipeline_depth < 2 || b.pipeline_depth > 16) {
    return invalid_argument("pipeline_depth " + std::to_string(b.pipeline_depth) +
                            " must be 2 (double) .. 16; 3 is triple buffering");
  }
  if (b.transfer_threads < 1 || b.transfer_threads > 64) {
    return invalid_argument("transfer_threads " + std::to_string(b.transfer_threads) + " must be 1 .. 64");
  }
  if (b.pinned_bytes < staging_bytes) {
    return out_of_space("pinned_bytes " + format_bytes(b.pinned_bytes) +
                        " cannot hold the NVMe pipelines' staging buffers: " + std::to_string(b.transfer_threads) +
                        " threads x " + std::to_string(b.pipeline_depth) + " x " + format_bytes(b.chunk_bytes) + " = " +
                        format_bytes(staging_bytes) +
                        "; raise pinned_bytes or lower chunk_bytes / pipeline_depth / transfer_threads");
  }
  uint64_t host_asked = b.pinned_bytes + (device.is_gpu() ? 0 : b.gpu_bytes);
  if (host_asked > facts.mem_available) {
    return out_of_space("host memory budget " + format_bytes(host_asked) + " (pinned " + format_bytes(b.pinned_bytes) +
                        (device.is_gpu() ? "" : " + GPU tier emulated in host memory " + format_bytes(b.gpu_bytes)) +
                        ") exceeds MemAvailable " + format_bytes(facts.mem_available) + "; lower pinned_bytes" +
                        (device.is_gpu() ? "" : " / gpu_bytes"));
  }
  const bool mlocked = !device.is_gpu() && b.lock_host_memory;
  if (mlocked && !facts.can_lock_unlimited && b.pinned_bytes > facts.memlock_limit) {
    return resource_exhausted("pinned budget " + format_bytes(b.pinned_bytes) + " exceeds RLIMIT_MEMLOCK " +
                              describe_memlock(facts) +
                              " (host memory is mlock'ed without a GPU); raise it "
                              "(ulimit -l unlimited, or memlock in /etc/security/limits.conf), run with CAP_IPC_LOCK, "
                              "or set lock_host_memory=false");
  }
  if (device.is_gpu() && b.gpu_bytes > 0) {
    TZ_ASSIGN_OR_RETURN(uint64_t free, device.free_bytes());
    if (b.gpu_bytes > free) {
      return out_of_space("gpu_bytes (gpu_memory_limit) " + format_bytes(b.gpu_bytes) + " exceeds the " +
                          format_bytes(free) + " free on " + device.description() + "; lower gpu_bytes");
    }
  }
  return {};
}

}  // namespace tierzero::offload
