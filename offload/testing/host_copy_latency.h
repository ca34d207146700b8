// Testing only: copies still in flight on the host-memory GPU tier. The host tier normally
// completes a copy inside copy_async; for a scope, a ScopedHostCopyLatency makes every tier manager
// created in it run its copies on lane threads, each one a fixed time after it was queued, as a
// GPU stream does, so the tier state machine meets in-flight copies on a machine without a GPU.
#pragma once

#include <chrono>

namespace tierzero::offload::testing {

class ScopedHostCopyLatency {
 public:
  // From now until destruction, TierManager::create gives its host-memory GPU tier (DeviceChoice
  // kHost, or no GPU found) this copy latency, in place of that of an enclosing scope.
  explicit ScopedHostCopyLatency(std::chrono::microseconds latency);
  // Puts back the latency of the enclosing scope (zero outside every scope: copies complete at once).
  ~ScopedHostCopyLatency();
  ScopedHostCopyLatency(const ScopedHostCopyLatency&) = delete;
  ScopedHostCopyLatency& operator=(const ScopedHostCopyLatency&) = delete;

 private:
  std::chrono::microseconds previous_;
};

}  // namespace tierzero::offload::testing
