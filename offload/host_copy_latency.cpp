// The process-wide copy latency behind testing/host_copy_latency.h; TierManager::create reads it.
#include "offload/testing/host_copy_latency.h"

#include <atomic>

#include "offload/internal/device_memory.h"

namespace tierzero::offload {
namespace {

std::atomic<int64_t> g_latency_us{0};

}  // namespace

std::chrono::microseconds scoped_host_copy_latency() {
  return std::chrono::microseconds(g_latency_us.load(std::memory_order_acquire));
}

namespace testing {

ScopedHostCopyLatency::ScopedHostCopyLatency(std::chrono::microseconds latency)
    : previous_(g_latency_us.exchange(latency.count(), std::memory_order_acq_rel)) {}

ScopedHostCopyLatency::~ScopedHostCopyLatency() { g_latency_us.store(previous_.count(), std::memory_order_release); }

}  // namespace testing
}  // namespace tierzero::offload
