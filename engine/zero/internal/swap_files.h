// The swap files of state homed on NVMe, in fixed-size records: one file per nvme_path per rank,
// <path>/tierzero-<role>-r<rank>.swap, preallocated at creation and removed when the swap goes. Two
// roles use them: the optimizer (nvme_offload_adam.h: record k is sub-group k's fp32 master, exp_avg
// and exp_avg_sq back to back) and the parameters (nvme_params.h: record k is the 16-bit compute
// weights of the same sub-group). A record is striped over the paths: record bytes [p*P, (p+1)*P)
// are in path p's file at offset k*P, P being the largest record split evenly over the paths and
// rounded up to 4096 bytes — so every record keeps a stable place, every device carries an equal
// share of every transfer, and offsets stay aligned for O_DIRECT.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::engine {

// One record transfer in flight: its tickets (one per path it touches), waited for together.
struct SwapTransfer {
  nvme::Op op = nvme::Op::kRead;
  int64_t sub_group = -1;  // -1: none in flight
  uint64_t begin = 0;      // bytes [begin, end) of the record
  uint64_t end = 0;
  std::vector<nvme::IoTicket> tickets;
  std::vector<size_t> parts;  // the path of each ticket
};

// What a swap holds, for its file names and its errors.
struct SwapRole {
  const char* file_stem;    // "optimizer": tierzero-optimizer-r<rank>.swap
  const char* key;          // the ds_config key of its directories
  const char* record_name;  // "optimizer sub-group": what record k is called in errors
  const char* contents;     // "optimizer state": what the files hold, in errors
};
inline constexpr SwapRole kOptimizerSwap{"optimizer", "zero_optimization.offload_optimizer.nvme_path",
                                         "optimizer sub-group", "optimizer state"};
inline constexpr SwapRole kParameterSwap{"params", "zero_optimization.offload_param.nvme_path", "parameter record",
                                         "parameter shard"};

class SwapFiles {
 public:
  // Opens and preallocates the files for `sub_groups` records of at most `record_bytes` over
  // `paths`; errors name file record k as sub-group `first_named` + k (the optimizer's records kept in
  // pinned memory have no place in the files, which start at the first streamed one). Over
  // `paths` (directories, created when missing; at least one) for rank `rank`, through `io`
  // (outlives the swap). Fails
  // before writing anything: kInvalidArgument for no path; kOutOfSpace when a path's disk has less
  // free than its file needs, naming the path, the bytes needed and free, and the fix; the open or
  // preallocation error naming the file otherwise.
  static Result<std::unique_ptr<SwapFiles>> create(nvme::IoEngine& io, const std::vector<std::string>& paths,
                                                   int rank, int64_t sub_groups, uint64_t record_bytes,
                                                   const SwapRole& role = kOptimizerSwap, int64_t first_named = 0);
  // Removes the files.
  ~SwapFiles();
  SwapFiles(const SwapFiles&) = delete;
  SwapFiles& operator=(const SwapFiles&) = delete;

  // Queues a read (op kRead) or write of sub-group `sub_group`'s record, its first `bytes` bytes
  // (at most record_bytes), into or from `buffer`, which must stay valid until wait() returned.
  SwapTransfer submit(nvme::Op op, int64_t sub_group, void* buffer, uint64_t bytes) {
    return submit(op, sub_group, buffer, 0, bytes);
  }
  // The same for bytes [begin, end) of the record only, to or from the same bytes of `buffer` (the
  // record's image); `begin` must be a multiple of 4096 (kRecordAlignment), for O_DIRECT.
  SwapTransfer submit(nvme::Op op, int64_t sub_group, void* buffer, uint64_t begin, uint64_t end) {
    return submit_at(op, sub_group, static_cast<std::byte*>(buffer) + begin, begin, end);
  }
  // The same, to or from `data`, which holds record bytes [begin, end) from its first byte.
  SwapTransfer submit_at(nvme::Op op, int64_t sub_group, void* data, uint64_t begin, uint64_t end);
  static constexpr uint64_t kRecordAlignment = 4096;
  // Waits for every ticket of `transfer` (none: ok) and marks it done. The error names the file,
  // the offset, the sub-group and the fix; a full disk is kOutOfSpace with the bytes needed and
  // free.
  Status wait(SwapTransfer& transfer);

  // Bytes the files take on disk (preallocated), summed over the paths.
  uint64_t file_bytes() const;
  // "<n> file(s): path, ...", for banners and errors.
  std::string describe() const;

 private:
  struct Part {
    nvme::FileRef file;
    std::string path;
  };
  SwapFiles(nvme::IoEngine& io, uint64_t part_bytes, int64_t sub_groups, const SwapRole& role, int64_t first_named)
      : io_(io), part_bytes_(part_bytes), sub_groups_(sub_groups), role_(role), first_named_(first_named) {}
  Status failure(const SwapTransfer& transfer, size_t part, const Status& status) const;

  nvme::IoEngine& io_;
  uint64_t part_bytes_;  // P: a record's share of each file
  int64_t sub_groups_;
  SwapRole role_;
  int64_t first_named_;
  std::vector<Part> parts_;  // one per path
};

}  // namespace tierzero::engine
