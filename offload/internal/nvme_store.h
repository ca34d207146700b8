// The NVMe tier: one preallocated swap file per path, shards striped over the files like RAID-0
// in `stripe_bytes` units. A shard's stripe i lives in file i % n, inside one contiguous extent
// per file allocated by a RangeAllocator, so a shard is n extents whatever its size. Not
// thread-safe for allocation; I/O submission is (the IoEngine is).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nvme/io_engine.h"
#include "offload/internal/range_allocator.h"
#include "offload/tier_manager.h"

namespace tierzero::offload {

// Where one shard's bytes are: part f in swap file f (files past parts.size() hold none of it).
struct NvmeExtent {
  uint64_t bytes = 0;
  std::vector<uint64_t> part_offset;
  std::vector<uint64_t> part_bytes;
};

class NvmeStore {
 public:
  // Checks free space on every path (statvfs) against its share of `budgets.nvme_bytes` and
  // opens and preallocates the swap files. The error names the path, the bytes asked and free;
  // a disk that fills during preallocation is a disk-full kOutOfSpace (see full_disk).
  static Result<std::unique_ptr<NvmeStore>> create(const TierBudgets& budgets, nvme::IoEngine& io);
  // Removes the swap files unless keep_nvme_files.
  ~NvmeStore();

  // "nvme: 64.00 GiB over 2 path(s) ..." for the budget statement.
  std::string describe() const;
  uint64_t capacity() const;
  uint64_t used() const;
  uint64_t stripe_bytes() const { return stripe_; }

  // Extents for a shard of `bytes`, or kOutOfSpace with the numbers.
  Result<NvmeExtent> allocate(uint64_t bytes);
  // Ok unless a swap file the file system did not preallocate (it refused fallocate) lies on a
  // disk without the free space for its part of a shard of `bytes`: then the disk-full error
  // (see full_disk), before any data is written. Preallocated files always have room.
  Status check_disk_room(uint64_t bytes) const;
  void free(const NvmeExtent& extent);
  // Claims the extent a record names (see attach_nvme in tier_manager.h).
  Result<NvmeExtent> claim(const NvmeShardRecord& record);
  // The record parts of `extent`.
  std::vector<NvmeExtentPart> parts(const NvmeExtent& extent) const;
  // For a write of `bytes` to `extent` that failed with kOutOfSpace (ENOSPC / EDQUOT): the
  // disk-full error, naming the swap files, the bytes needed, the bytes free on their disks and
  // the fix, with `status`'s message at the end. Any other status is returned unchanged.
  Status full_disk(const Status& status, const NvmeExtent& extent, uint64_t bytes) const;

  // Submits I/O for bytes [shard_offset, shard_offset + length) of the shard at `extent`,
  // to or from `buffer`; one request per run of stripes that is contiguous in one file.
  std::vector<nvme::IoTicket> submit(const NvmeExtent& extent, nvme::Op op, uint64_t shard_offset, void* buffer,
                                     uint64_t length);

 private:
  struct SwapFile {
    nvme::FileRef file;
    std::string path;
    std::string dir;
    RangeAllocator extents;
    bool reserved = true;  // the file system holds blocks for the whole file (fallocate worked)
  };
  NvmeStore(nvme::IoEngine& io, uint64_t stripe, bool keep) : io_(io), stripe_(stripe), keep_(keep) {}

  nvme::IoEngine& io_;
  uint64_t stripe_;
  bool keep_;
  std::vector<SwapFile> files_;
};

// Waits for every ticket; returns the first error (all tickets are waited for even then).
Status wait_all(const std::vector<nvme::IoTicket>& tickets);

}  // namespace tierzero::offload
