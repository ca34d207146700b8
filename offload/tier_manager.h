// tierzero offload/: the tier manager. It decides where every parameter and optimizer shard lives
// (GPU memory, pinned host memory, NVMe) and moves it just in time.
//
// Tiers and pools
// - GPU: one device arena of exactly `gpu_bytes` (the hard `gpu_memory_limit`), carved into
//   exact-size blocks. Without CUDA, or with CUDA but no GPU at run time, the GPU tier is host
//   memory and everything else behaves the same.
// - Pinned host: arenas of `pinned_arena_bytes` (THP memory + cudaHostRegister, else mlock'ed pages),
//   carved into exact-size blocks (no power-of-two rounding), registered with the IoEngine as fixed
//   buffers. A slice of the budget is the staging buffers of the NVMe <-> GPU pipelines.
// - NVMe: one preallocated swap file per path, shards striped over them like RAID-0; extents are
//   named by shard id (never by address), listed by nvme_manifest() for checkpoints and re-attached
//   by attach_nvme(). Swap files are removed on destruction unless `keep_nvme_files`.
//
// Shards and residency
// - A shard has a stable id, a size, a dtype and a home tier where its storage is reserved at
//   registration; the home copy is never evicted. Other tiers hold cached copies, evicted by
//   next-use distance (the recorded access trace) or least-recent use when there is no trace.
// - fetch(id, tier) makes a copy in `tier` and holds it until release(id). A shard is held in at
//   most one tier at a time (its current tier); several read holds in that tier stack.
// - A write hold (Access::kWrite) is exclusive. Changes made through it reach the home tier at
//   writeback(id), or at release(id) when no writeback followed the fetch. Until then the home copy
//   keeps the previous version; a failed writeback leaves the held copy whole and un-evictable.
// - Every state change is thread-safe; operations on one shard run in the order they were called,
//   operations on different shards run concurrently on `transfer_threads` workers.
//
// Transfers are chunked pipelines: NVMe -> pinned staging -> GPU and back, `pipeline_depth`
// staging buffers per pipeline, H2D and D2H on their own CUDA streams ordered by events; nothing
// waits on the whole device.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::offload {

enum class Tier : uint8_t { kGpu = 0, kPinned = 1, kNvme = 2 };
inline constexpr int kTierCount = 3;

// Returns "gpu", "pinned" or "nvme".
const char* tier_name(Tier tier);

// How the GPU tier is backed.
enum class DeviceChoice : uint8_t {
  kAuto,  // a CUDA GPU when one is present at run time (cudaGetDeviceCount > 0), else host memory
  kHost,  // host memory, even where a GPU exists (tests of the state machine)
};

// Budgets and knobs of the three tiers. The engine maps ds_config's offload blocks onto this.
struct TierBudgets {
  uint64_t gpu_bytes = 0;                             // gpu_memory_limit; 0 leaves the GPU tier unused
  uint64_t pinned_bytes = 0;                          // whole pinned budget, staging buffers included
  uint64_t pinned_arena_bytes = 256ull << 20;         // size of each pinned arena (the last may be smaller)
  bool lock_host_memory = true;                       // mlock host-backed pinned arenas (no-GPU case)
  uint64_t nvme_bytes = 0;                            // swap space summed over nvme_paths
  std::vector<std::string> nvme_paths;                // directories; one swap file each, striped
  uint64_t stripe_bytes = 1ull << 20;                 // RAID-0 stripe unit (multiple of 4096)
  std::string swap_file_prefix = "tierzero-swap-r0";  // swap files: <path>/<prefix>-s<k>.bin
  bool keep_nvme_files = false;                       // keep swap files on exit (a checkpoint captured them)
  uint64_t chunk_bytes = 8ull << 20;                  // pipeline chunk
  uint32_t pipeline_depth = 3;                        // staging buffers per pipeline: 2 double, 3 triple
  uint32_t transfer_threads = 4;                      // concurrent shard transfers (each owns a pipeline)
  uint64_t prefetch_bytes = 256ull << 20;             // bytes the trace replay keeps ahead of use; 0: none
  DeviceChoice device = DeviceChoice::kAuto;
  int cuda_device = 0;
  nvme::IoConfig io;  // used when the manager creates its own IoEngine
};

struct ShardSpec {
  std::string id;  // stable tensor id, e.g. "layers.3.mlp.up/exp_avg"
  uint64_t bytes = 0;
  ElementType dtype = ElementType::kU8;  // offload moves bytes; carried for the engine and manifests
  Tier home = Tier::kPinned;
};

enum class Access : uint8_t { kRead, kWrite };

// A held copy. `data` is a device pointer for Tier::kGpu (host memory in host emulation), a host
// pointer for Tier::kPinned, and null for Tier::kNvme (a hold there only keeps the copy in place).
struct ShardView {
  void* data = nullptr;
  uint64_t bytes = 0;
  Tier tier = Tier::kPinned;
  uint64_t version = 0;
};

struct ShardInfo {
  ShardSpec spec;
  uint64_t version = 0;           // bumped by every completed writeback
  bool valid[kTierCount] = {};    // tiers holding the current contents
  bool has_current_tier = false;  // held by a fetch
  Tier current_tier = Tier::kPinned;
  uint32_t holds = 0;
  bool write_hold = false;
};

struct TierUsage {
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;      // allocated to shards (home storage and cached copies)
  uint64_t reserved_bytes = 0;  // held back from shards (pipeline staging)
};

// One part of a striped NVMe extent.
struct NvmeExtentPart {
  std::string file;  // full path of the swap file
  uint64_t offset = 0;
  uint64_t bytes = 0;  // bytes of this part, whole stripes
};

// A shard's NVMe copy as a checkpoint records it.
struct NvmeShardRecord {
  ShardSpec spec;  // spec.home is Tier::kNvme
  uint64_t version = 0;
  uint64_t stripe_bytes = 0;  // stripe i of the shard is in parts[i % parts.size()]
  std::vector<NvmeExtentPart> parts;
};

class TierManager {
 public:
  // Checks every budget against the machine and fails early with the numbers (asked, available,
  // RLIMIT_MEMLOCK, free disk via statvfs) and the fix; then allocates the arenas and
  // preallocates the swap files (a disk that fills meanwhile: kOutOfSpace "NVMe disk full"). `io` is used for NVMe I/O
  // and must outlive the manager; when null the manager creates its own from budgets.io.
  static Result<std::unique_ptr<TierManager>> create(const TierBudgets& budgets, nvme::IoEngine* io = nullptr);
  virtual ~TierManager() = default;

  // One line per tier: its budget, what backs it and what the machine has ("gpu: 22.00 GiB of
  // 139.50 GiB free on NVIDIA H200 ..."), for the start-up banner.
  virtual std::string budget_statement() const = 0;
  // True when the GPU tier is a CUDA device, false when it is host memory.
  virtual bool gpu_is_device() const = 0;

  // Registers a shard and reserves its storage in its home tier. Contents start as zeros.
  // kInvalidArgument for a duplicate id or zero bytes; kOutOfSpace with the numbers when the home
  // tier's budget cannot hold it after evicting cached copies, or when an NVMe swap file that
  // could not be preallocated lies on a disk without room for it ("NVMe disk full: ...").
  virtual Status register_shard(const ShardSpec& spec) = 0;
  // Drops a shard that is not held, freeing every copy. kNotFound / kInvalidArgument otherwise.
  virtual Status unregister_shard(const std::string& id) = 0;

  // Makes the shard's current contents present in `tier` and holds them there until release().
  // kInvalidArgument when the shard is held in another tier, held for writing, or (for kWrite)
  // held at all; kOutOfSpace with numbers when the tier's budget is full of held copies.
  virtual std::future<Result<ShardView>> fetch(const std::string& id, Tier tier, Access access = Access::kRead) = 0;
  // Copies the held write copy to the home tier and bumps the version. For a GPU hold the copy
  // starts, on the device, after the work queued on the default CUDA stream before this call (so
  // writes made there, kernels or cudaMemcpy, need no host sync); writes queued on other streams
  // must be complete before the call. On a shard without a write
  // hold, re-copies the current contents home when the home copy was lost to a failed writeback,
  // else does nothing. On failure the held copy stays whole and the error names file and offset;
  // a full disk (ENOSPC, EDQUOT) is kOutOfSpace "NVMe disk full: ..." with the swap file, the
  // bytes needed, the bytes free and the fix (free space, a smaller nvme_bytes, another path).
  virtual std::future<Status> writeback(const std::string& id) = 0;
  // Ends one hold. A write hold not written back since its fetch is written back first (its
  // error is returned and the copy kept). The copy stays cached until its space is needed, and
  // its GPU memory may be reused as soon as this completes: work on any stream that still reads
  // or writes the view must be complete before the call.
  // Bytes written after a writeback(id) are kept only by another writeback(id) before release.
  virtual std::future<Status> release(const std::string& id) = 0;
  // Loads copies into `tier` without holding them, evicting only copies needed later than these.
  // Completes when every load has finished; shards that do not fit are skipped, not errors.
  virtual std::future<Status> prefetch(const std::vector<std::string>& ids, Tier tier) = 0;

  // Drops the cached copy of `id` in `tier` to free its space now (e.g. GPU memory for
  // activations). Ok when there is none. kInvalidArgument for the home tier, a copy that is held,
  // or the last whole copy (after a failed writeback).
  virtual std::future<Status> evict(const std::string& id, Tier tier) = 0;

  // Starts recording the order of fetch() calls (one training step).
  virtual void begin_trace() = 0;
  // Stops recording. From then on each fetch() advances a cursor in the trace, the manager
  // prefetches the next `prefetch_bytes` of it, and eviction uses next-use distance in it.
  virtual void end_trace() = 0;

  // The registry entry of `id`; kNotFound otherwise.
  virtual Result<ShardInfo> info(const std::string& id) const = 0;
  virtual TierUsage usage(Tier tier) const = 0;

  // Lists every shard whose current contents are on NVMe: id -> (file, offset, bytes, version).
  virtual std::vector<NvmeShardRecord> nvme_manifest() const = 0;
  // Re-attaches records from nvme_manifest() of an earlier manager over the same swap files
  // (keep_nvme_files): registers each shard with home NVMe and its extents at the recorded
  // places, contents and version intact. kInvalidArgument when a record names another file or
  // stripe size, overlaps another, or lies outside the file.
  virtual Status attach_nvme(const std::vector<NvmeShardRecord>& records) = 0;
};

// ---- Pinned host buffers for a caller that schedules its own copies ----------------------------
// The engine's offloaded step keeps its host tier (fp32 master, m, v, gradient landing and staging
// buffers, offloaded parameter shards) here: the tier manager's exact-size pool (arena_pool.h) over
// pinned arenas (huge-page memory registered with CUDA when a GPU is present, else host memory, mlock'ed on
// request), allocated in full at creation so the whole budget is checked before the first buffer.
struct PinnedPoolOptions {
  uint64_t capacity_bytes = 0;  // the whole budget; every arena is allocated by create()
  uint64_t arena_bytes = 0;     // size of each arena (the last may be smaller); 0: one arena
  DeviceChoice device = DeviceChoice::kAuto;
  int cuda_device = 0;
  bool lock_host_memory = false;  // host-backed arenas only: mlock them (RLIMIT_MEMLOCK applies)
};

class PinnedHostPool {
 public:
  // Checks the capacity against MemAvailable (and RLIMIT_MEMLOCK when locking host memory), then
  // allocates the arenas. kOutOfSpace / kResourceExhausted with the bytes asked and available.
  static Result<std::unique_ptr<PinnedHostPool>> create(const PinnedPoolOptions& options);
  ~PinnedHostPool();
  PinnedHostPool(const PinnedHostPool&) = delete;
  PinnedHostPool& operator=(const PinnedHostPool&) = delete;

  // Bytes a block of `bytes` takes from the pool, alignment rounding included: a budget that sums
  // this over its blocks (and keeps each under arena_bytes) is what create() must be given.
  static uint64_t footprint(uint64_t bytes);

  // `bytes` (> 0) of pinned memory, aligned to ArenaPool's block alignment (4096 from 80 KiB up,
  // at least 16), contents unspecified. Thread-safe. kOutOfSpace naming the bytes asked, used and
  // the capacity when no arena has room.
  Result<void*> allocate(uint64_t bytes);
  // Returns a block from allocate(). Thread-safe.
  void free(void* data);

  // True when the arenas are page-locked for a CUDA device (cudaHostRegister): copies are DMA.
  bool gpu_pinned() const;
  uint64_t capacity() const;
  // Bytes taken by live blocks, rounding included.
  uint64_t used() const;
  // "12.00 GiB pinned (huge pages registered with CUDA, 1 arena) on NVIDIA H200" or "... host memory (no GPU: ...)".
  std::string description() const;

 private:
  struct Impl;
  explicit PinnedHostPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---- Copy measurements for `tierzero bench pcie` / `bench tiers` ----------------------------

enum class CopyDirection : uint8_t { kH2D, kD2H, kDuplex };
enum class HostMemoryKind : uint8_t { kPinned, kPageable };
enum class CopyMethod : uint8_t {
  kTierzero,    // tierzero's chunked pipeline: async copies on its H2D/D2H streams + events
  kCudaMemcpy,  // the peer: plain cudaMemcpy of chunk_bytes, back to back (duplex: two threads)
};

struct CopyMeasurement {
  uint64_t bytes = 0;  // bytes moved (duplex: both directions summed)
  double seconds = 0;
  bool verified = false;  // the destination equals the source, byte for byte
};

// Host and device buffers for timing copies between host and GPU.
class CopyProbe {
 public:
  // Allocates two pinned, two pageable and two device buffers of `bytes` each. kUnsupported with
  // a clear message when no CUDA GPU is present (or the build has no CUDA).
  static Result<std::unique_ptr<CopyProbe>> create(uint64_t bytes, int cuda_device = 0);
  virtual ~CopyProbe() = default;
  // "NVIDIA H200 (PCIe gen 5 x16), CUDA 13.0"
  virtual std::string device_description() const = 0;
  // Copies the whole buffer in `chunk_bytes` pieces `repeats` times; verifies the last pass.
  virtual Result<CopyMeasurement> measure(CopyDirection direction, HostMemoryKind host, CopyMethod method,
                                          uint64_t chunk_bytes, int repeats) = 0;
};

}  // namespace tierzero::offload
