// The pieces of offload/'s stack the ZeRO step runs on, under the names the engine uses: the pinned
// host tier, the side-stream copies to and from the device and the copies the compute stream is
// ordered after lazily (offload/torch/offload_torch.h), the NVMe swap files in records
// (offload/offload.h, which also says how the pieces fit together).
#pragma once

#include <chrono>

#include "offload/offload.h"
#include "offload/torch/offload_torch.h"

namespace tierzero::engine {

using offload::byte_tensor;
using offload::bytes_of;
using offload::CopyDone;
using offload::device_memory_bytes;
using offload::DeviceCopies;
using offload::HostTier;
using offload::IdleGap;
using offload::kOptimizerSwap;
using offload::kParameterSwap;
using offload::limit_device_memory;
using offload::PartitionWrite;
using offload::PendingWrites;
using offload::PinnedRole;

// Seconds from `start` to now on the steady clock (the step's phase and wait timings).
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tierzero::engine
