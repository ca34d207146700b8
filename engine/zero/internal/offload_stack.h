// The pieces of offload/'s stack the ZeRO step runs on, under the names the engine uses: the pinned
// host tier, the side-stream copies to and from the device and the copies the compute stream is
// ordered after lazily (offload/torch/offload_torch.h), the NVMe swap files in records
// (offload/offload.h, which also says how the pieces fit together).
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

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

// Blocks until `device`'s current stream has run everything queued on it so far; returns at once
// for the CPU.
inline void sync_current_stream(at::Device device) {
  if (device.is_cpu()) return;
  c10::impl::getDeviceGuardImpl(device.type())->getStream(device).synchronize();
}

}  // namespace tierzero::engine
