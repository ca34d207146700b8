// Testing only: faults on the NVMe engine's completions. While a ScopedFaultInjector lives, every
// piece completion of every IoEngine in the process passes through its injector before the engine
// classifies it, so a test can fail the I/O of code that makes its own engine (offload/'s record
// staging over the NVMe optimizer's swap files, the NVMe parameters) as well as of an engine it holds.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "nvme/io_engine.h"

namespace tierzero::nvme::testing {

// What a fault injector sees for each piece's completion.
struct PieceCompletion {
  const std::string& path;
  Op op;
  uint64_t offset;
  uint64_t length;
};

// Called with each piece's raw result (bytes >= 0, or -errno), on the engine's threads (several at
// once); returns the result to use instead (e.g. -EIO, a short count, or 0).
using FaultInjector = std::function<int64_t(const PieceCompletion&, int64_t result)>;

class ScopedFaultInjector {
 public:
  // From now until destruction, every engine's piece completions go through `injector` (in place
  // of the injector of an enclosing scope, if any). The injector must stay callable until the I/O
  // submitted in this scope has completed.
  explicit ScopedFaultInjector(FaultInjector injector);
  // Puts back the injector of the enclosing scope (none outside every scope).
  ~ScopedFaultInjector();
  ScopedFaultInjector(const ScopedFaultInjector&) = delete;
  ScopedFaultInjector& operator=(const ScopedFaultInjector&) = delete;

 private:
  std::shared_ptr<const FaultInjector> previous_;
};

}  // namespace tierzero::nvme::testing
