// doctor: RAM, the locked-memory limit and a real pinned allocation.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "common/common.h"
#include "offload/offload.h"
#include "tools/doctor_checks.h"
#include "tools/machine_facts.h"

namespace tierzero::tools {

namespace {

constexpr uint64_t kLowRam = 8ull << 30;
constexpr uint64_t kLowMemlock = 1ull << 30;
constexpr int kCapIpcLock = 14;

// Whether this process holds CAP_IPC_LOCK (RLIMIT_MEMLOCK does not apply then).
bool has_ipc_lock() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    return (std::stoull(line.substr(7), nullptr, 16) >> kCapIpcLock) & 1;
  }
  return false;
}

// Pins `bytes` as training's host tier does: one PinnedHostPool arena (huge pages registered with
// CUDA where there is a GPU; without one, host memory mlock'ed, the RLIMIT_MEMLOCK case).
DoctorLine pinned_probe(uint64_t bytes) {
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<offload::PinnedHostPool>> pool = offload::PinnedHostPool::create(
      {.capacity_bytes = bytes, .device = offload::DeviceChoice::kAuto, .lock_host_memory = true});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!pool.ok()) {
    // A warning: training still runs, with pageable staging (slower copies) or unlocked host memory.
    return {"memory", "pinned probe", "pinning " + format_bytes(bytes) + " failed: " + pool.status().message(),
            Verdict::kWarn,
            "raise the limit (ulimit -l unlimited; limits.conf memlock; docker run --ulimit memlock=-1) or run "
            "with CAP_IPC_LOCK"};
  }
  const bool gpu = (*pool)->gpu_pinned();
  char took[32];
  std::snprintf(took, sizeof took, "%.2f s", seconds);
  return {"memory", "pinned probe",
          format_bytes(bytes) + " pinned in " + took +
              (gpu ? " (huge pages registered with CUDA)" : " (mmap + mlock, no GPU)"),
          Verdict::kOk, ""};
}

}  // namespace

std::vector<DoctorLine> check_memory(uint64_t pin_probe_bytes) {
  std::vector<DoctorLine> lines;
  const auto [available, total] = host_memory();
  lines.push_back({"memory", "RAM", format_bytes(available) + " available of " + format_bytes(total),
                   available < kLowRam ? Verdict::kWarn : Verdict::kOk,
                   available < kLowRam ? "offloading keeps ~16 bytes per parameter in host memory: free memory or "
                                         "offload optimizer state to NVMe"
                                       : ""});
  rlimit limit{};
  getrlimit(RLIMIT_MEMLOCK, &limit);
  const bool unlimited = limit.rlim_cur == RLIM_INFINITY;
  const bool cap = has_ipc_lock();
  std::string value = std::string("ulimit -l ") + (unlimited ? "unlimited" : format_bytes(limit.rlim_cur));
  if (cap) value += "; CAP_IPC_LOCK held, so the limit does not apply";
  const bool low = !unlimited && !cap && limit.rlim_cur < kLowMemlock;
  lines.push_back({"memory", "RLIMIT_MEMLOCK", value, low ? Verdict::kWarn : Verdict::kOk,
                   low ? "pinned host memory without a GPU is mlock'ed and needs this limit raised: ulimit -l "
                         "unlimited (limits.conf memlock, docker --ulimit memlock=-1)"
                       : ""});
  lines.push_back(pinned_probe(pin_probe_bytes));
  return lines;
}

}  // namespace tierzero::tools
