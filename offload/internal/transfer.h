// Copies a shard's bytes between tiers. NVMe <-> GPU goes through a pipeline of pinned staging
// buffers: while chunk k crosses PCIe (its own stream, ordered by an event per buffer), chunks
// k+1 .. k+depth-1 are being read from (or written to) NVMe. Pinned <-> GPU is a chunked async
// copy on the H2D or D2H stream; NVMe <-> pinned is direct I/O into the pinned block.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "offload/internal/device_memory.h"
#include "offload/internal/nvme_store.h"

namespace tierzero::offload {

// One copy of a shard: a pointer for GPU and pinned copies, an extent for NVMe; `zeros` stands
// for a shard that was never written (a source only).
struct Location {
  Tier tier = Tier::kPinned;
  void* data = nullptr;
  const NvmeExtent* extent = nullptr;
  bool zeros = false;
};

// `depth` pinned buffers of `chunk_bytes` and one device event each: one pipeline's working set.
struct StagingSet {
  std::vector<std::byte*> buffers;
  std::vector<std::unique_ptr<DeviceEvent>> events;
};

class Transfers {
 public:
  // `staging` holds one StagingSet per concurrent transfer; their memory belongs to the caller.
  Transfers(DeviceMemory& device, NvmeStore* store, uint64_t chunk_bytes, std::vector<StagingSet> staging);

  // Copies `bytes` from `src` to `dst` (different tiers, or zeros to any tier) and returns when
  // the destination holds them and no copy touches either any more, even on error. Errors name
  // the tier pair and the failing chunk. With `after_caller_writes`, a GPU source is read only
  // after the work queued on the default CUDA stream so far (the caller's writes into its view).
  Status copy(const Location& src, const Location& dst, uint64_t bytes, bool after_caller_writes = false);

 private:
  // Borrows a staging set for one pipeline; blocks while all are lent.
  StagingSet* acquire();
  void give_back(StagingSet* set);

  // Blocks until every copy queued on `lane` so far has completed.
  Status drain(Lane lane);
  Status device_copy(Lane lane, void* dst, const void* src, uint64_t bytes);
  Status fill(const Location& dst, uint64_t bytes);
  Status nvme_to_device(const NvmeExtent& src, std::byte* dst, uint64_t bytes);
  Status device_to_nvme(const std::byte* src, const NvmeExtent& dst, uint64_t bytes);
  Status zeros_to_nvme(const NvmeExtent& dst, uint64_t bytes);

  DeviceMemory& device_;
  NvmeStore* store_;
  uint64_t chunk_;
  std::vector<StagingSet> staging_;
  std::mutex mu_;
  std::condition_variable available_cv_;
  std::vector<StagingSet*> available_;
};

}  // namespace tierzero::offload
