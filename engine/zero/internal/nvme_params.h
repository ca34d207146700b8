// ZeRO-3 parameters homed on NVMe (zero_optimization.offload_param.device "nvme"): this rank's shard
// of the compute weights lives in swap files (role "params"), never whole in host memory, moved
// through offload/'s RecordRing: the read buffers are its ring, the two write windows its windows.
// Record k holds the weights of the optimizer's sub-group k (sub_group_size elements), so every
// range the optimizer sends starts on a 4096-byte boundary of its record (O_DIRECT).
//   Reads (a gather's input): the shard ranges are cut at records and at buffer_numel elements into
//       pieces, each read into the next of buffer_count pinned buffers in turn (offload_param.
//       buffer_count x buffer_size). The caller lands a read (waits for it and queues the pieces'
//       copies to the device); a buffer still held by an unlanded read is named by holders_of_next()
//       so that the caller lands that read first.
//   Writes (lend / send): the optimizer steps into the two windows in turn; send() queues the
//       window's write, which later reads order after (PartitionWrite).
//   max_in_cpu: the shard's first floor(max_in_cpu / record) records stay in pinned host memory
//       instead (as DeepSpeed keeps up to max_in_cpu elements of the 16-bit parameters in a CPU
//       buffer): their pieces are copied to the device from there, and the optimizer steps them in
//       place.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/partition_layout.h"
#include "nvme/io_engine.h"

namespace tierzero::engine {

// Where and how the parameters go to NVMe (ds_config's offload_param and aio blocks).
struct NvmeParamOptions {
  std::vector<std::string> paths;      // offload_param.nvme_path (several stripe, as the optimizer's)
  int buffer_count = 5;                // offload_param.buffer_count: pinned read buffers
  int64_t buffer_numel = 100'000'000;  // offload_param.buffer_size: elements a read buffer holds
  int64_t max_in_cpu = 0;              // offload_param.max_in_cpu: elements kept in host memory
  nvme::IoConfig io;                   // the "aio" block
};

struct NvmeParamsSetup {
  NvmeParamOptions options;
  int rank = 0;                          // names the swap files
  int64_t shard_numel = 0;               // this rank's shard (padding included)
  int64_t record_numel = 0;              // the optimizer's sub-group: min(sub_group_size, shard_numel)
  at::ScalarType dtype = at::kBFloat16;  // the compute dtype
  std::vector<at::Tensor> read_buffers;  // buffer_count pinned byte buffers (state_layout::param_read_buffer_bytes)
  std::vector<at::Tensor> windows;       // 2 pinned byte buffers of a record (record_numel elements)
  at::Tensor host_records;               // state_layout::param_records_in_memory records (dtype), pinned; may be empty
};

// One piece of a read: shard elements [begin, begin + count), bound for element `dst_offset` of the
// read's destination, read into buffer `buffer` with `skip` bytes before its first element (buffer
// -1: a record kept in host memory, copied from there).
struct ParamReadPiece {
  int64_t begin = 0;
  int64_t count = 0;
  int64_t dst_offset = 0;
  int buffer = -1;
  uint64_t skip = 0;
};

// A read in flight: its pieces (queued).
struct ParamRead {
  std::vector<ParamReadPiece> pieces;
};

// This rank's shard ranges of `slots` of `layout` ([begin, end) element pairs, adjacent ones merged,
// in slot order).
std::vector<std::pair<int64_t, int64_t>> shard_ranges(const ShardedLayout& layout, const std::vector<size_t>& slots);

// The pieces a read of `ranges` takes from records of `record_numel` elements through buffers of
// `buffer_numel` (cut at both), destinations in order; not yet queued.
std::vector<ParamReadPiece> cut_reads(const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t record_numel,
                                      int64_t buffer_numel);

// Whether every unit's parameters above `persistence_threshold` (unit_slots: unit -> layout slots)
// can be read at once through options.buffer_count buffers, with records of `record_numel`: checked
// before anything is allocated. kInvalidArgument naming rank `rank`, the unit, the pieces it needs,
// offload_param.buffer_count and the fix otherwise.
Status check_read_buffers(const ShardedLayout& layout, const std::vector<std::vector<size_t>>& unit_slots,
                          int64_t persistence_threshold, int64_t record_numel, const NvmeParamOptions& options,
                          int rank);

class NvmeParams final {
 public:
  // Creates the swap files (zero-filled records are not written: write_all() fills them). Throws
  // tierzero::Error: buffer_count or buffer_size out of range naming the key; the swap's errors
  // (disk full with the bytes needed and free; a path that cannot be written).
  static std::unique_ptr<NvmeParams> create(NvmeParamsSetup setup);
  ~NvmeParams();

  // Fills every record through the windows: fill(begin, window) writes the weights of shard
  // elements [begin, begin + window.numel()) into `window` (dtype()); returns once all are written.
  // Throws tierzero::Error with a write's error.
  void write_all(const std::function<void(int64_t begin, const at::Tensor& window)>& fill);

  // The pieces a read of the shard `ranges` ([begin, end) element pairs, destination in that order)
  // takes, not yet queued.
  std::vector<ParamReadPiece> cut(const std::vector<std::pair<int64_t, int64_t>>& ranges) const;
  // The tags of unlanded reads holding the buffers that `pieces` would take next, each once, oldest
  // first.
  std::vector<uint64_t> holders_of_next(const std::vector<ParamReadPiece>& pieces) const;
  // Queues `pieces` (from cut(); at most buffer_count from NVMe) into the next buffers in turn, each after
  // the copy that last read its buffer has run; the buffers are held for `tag` until land(). Throws
  // tierzero::Error (internal) if a buffer is still held (holders_of_next() was not landed).
  ParamRead start_read(std::vector<ParamReadPiece> pieces, uint64_t tag);
  // Whether every piece of `read` has arrived (never blocks).
  bool arrived(const ParamRead& read) const;
  // Waits for `read`, then queues each piece's copy into dst.narrow(0, dst_offset, count) (`dst` on
  // the device, contiguous, dtype()) through `copies`, and frees its buffers for reuse once those
  // copies have run. Returns the last copy: in stream order, its completion is all of theirs. Throws
  // tierzero::Error with the read's error.
  std::shared_ptr<CopyDone> land(ParamRead& read, const at::Tensor& dst, DeviceCopies& copies);

  // Where the offloaded optimizer sends the new compute weights (the partition is neither on the
  // device nor in host memory): it writes each stepped range into a window lent here, then sends it
  // home. The send is a PartitionWrite, so readers of the partition order after it exactly as after
  // a device copy.
  // The compute dtype of the windows (bf16 / fp16, or fp32).
  at::ScalarType dtype() const { return setup_.dtype; }
  // A host window (contiguous, dtype()) for the new weights of elements [begin, begin + count) of
  // the partition, a range inside one of the optimizer's sub-groups (sub_group_size, at most the
  // partition: a window's size); blocks until the window's last send has completed.
  // Valid until send(begin, count).
  at::Tensor lend(int64_t begin, int64_t count);
  // The window lent for [begin, begin + count) holds the final values: queues them home and returns
  // the write, whose CopyDone completes once a read of those elements sees them (its wait throws
  // tierzero::Error with the write's error).
  PartitionWrite send(int64_t begin, int64_t count);

  // NVMe bytes read and written since the last call (reads landed or not; writes queued).
  std::pair<uint64_t, uint64_t> take_traffic() { return ring_->take_traffic(); }
  // Bytes the swap files take on disk.
  uint64_t file_bytes() const { return ring_->file_bytes(); }
  int buffer_count() const { return static_cast<int>(ring_->read_buffers()); }

 private:
  explicit NvmeParams(NvmeParamsSetup setup) : setup_(std::move(setup)) {}
  int64_t element_bytes() const;
  // Shard element `e`'s record and its byte offset there.
  std::pair<int64_t, uint64_t> locate(int64_t e) const;
  // Whether shard element `e` is in a record kept in host memory.
  bool in_host(int64_t e) const { return e < host_numel_; }

  NvmeParamsSetup setup_;
  std::unique_ptr<offload::RecordRing> ring_;
  int64_t host_numel_ = 0;  // elements [0, host_numel_) are in setup_.host_records
};

}  // namespace tierzero::engine
