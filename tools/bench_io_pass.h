// One timed pass of `tierzero bench io`: sequential reads or writes of a whole file through the
// engine, `queue_depth × intra_op_parallelism` requests of `block_size` bytes in flight.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nvme/io_engine.h"

namespace tierzero::tools {

// Where the request buffers' memory comes from.
enum class BufferPages {
  kHuge,   // nvme::allocate_aligned: 2 MiB-aligned, on transparent huge pages where the kernel has them
  kSmall,  // 4 KiB-aligned malloc memory on 4 KiB pages, as fio's default buffers
};

// Aligned request buffers, one per request in flight, registered with the engine.
class BenchBuffers {
 public:
  // `slots` buffers of `block_size` bytes in one allocation of `pages`; registered for fixed-buffer
  // I/O where the engine can.
  BenchBuffers(nvme::IoEngine& engine, uint32_t slots, uint64_t block_size, BufferPages pages);
  ~BenchBuffers();
  BenchBuffers(const BenchBuffers&) = delete;
  BenchBuffers& operator=(const BenchBuffers&) = delete;

  uint32_t slots() const { return slots_; }
  uint64_t block_size() const { return block_size_; }
  std::byte* slot(uint32_t i) const { return memory_.get() + uint64_t{i} * block_size_; }

 private:
  nvme::IoEngine& engine_;
  uint32_t slots_;
  uint64_t block_size_;
  nvme::AlignedBuffer memory_;
};

struct PassResult {
  double seconds = 0;
  uint64_t bytes = 0;
  double p50_us = 0;  // per-request latency, submit to completion
  double p99_us = 0;
  double cpu_percent = 0;  // process CPU time (user + system, all threads) / wall time
  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

// What a pass does with the data.
enum class PassData {
  kWritePattern,  // writes block b as a fixed stream stamped with b (buffers filled once, untimed)
  kRead,          // reads, ignoring the content
  kVerify,        // reads and checks every block against what kWritePattern wrote there
  kMixed,         // reads of the file's first half and writes of its second half (kWritePattern's
                  // data), one request of each in turn: the NVMe optimizer's read-ahead beside its
                  // write-behind; `size` rounded down to two blocks
};

// Moves `size` bytes of `file` sequentially from offset 0 in requests of buffers.block_size(),
// keeping every buffer in flight (a finished request's buffer takes the next block at once);
// shows a progress bar labelled `label`. kVerify returns kCorrupt naming the first block that
// differs. With `end_fsync`, a write pass ends with an fdatasync inside the timed span (fio's
// end_fsync=1): the figure is then the rate at which bytes become durable.
Result<PassResult> run_pass(nvme::IoEngine& engine, const nvme::FileRef& file, BenchBuffers& buffers, uint64_t size,
                            PassData data, const std::string& label, bool end_fsync = false);

}  // namespace tierzero::tools
