// `tierzero bench io --pipeline`: the NVMe optimizer's record pipeline as it runs inside the
// backward (offload/'s RecordCache, read ahead and written behind, every pass back to front), with
// a fixed time per record standing in for CPU Adam and the gradients' arrival.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::tools {

struct PipelineShape {
  int64_t records = 32;         // sub-group records
  int64_t memory_records = 16;  // of them kept in pinned memory
  uint64_t record_bytes = 0;
  int buffers = 4;  // offload_optimizer.buffer_count
  bool spread = false;  // RecordCache's spread_memory: the records in memory among the streamed ones
  std::chrono::microseconds per_record{0};  // stands in for CPU Adam on each record
  int passes = 3;                           // timed, after an untimed first write of every record
};

struct PipelineResult {
  double seconds = 0;  // of the timed passes
  uint64_t read_bytes = 0;
  uint64_t written_bytes = 0;
  double wait_seconds = 0;  // blocked on the disk (RecordCache::wait_seconds)
  bool verified = false;  // every record read back held what the pass before wrote into it
  double gbps() const { return seconds > 0 ? (read_bytes + written_bytes) / seconds / 1e9 : 0; }
};

// Runs `shape`'s passes through swap files in `dir` with the engine config `io`; the I/O errors.
Result<PipelineResult> run_pipeline(const std::string& dir, const nvme::IoConfig& io, const PipelineShape& shape);

}  // namespace tierzero::tools
