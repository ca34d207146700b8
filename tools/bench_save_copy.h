// `tierzero bench save`: a periodic save's copy of the optimizer state into its write-behind buffers,
// through the save's own write path (begin_checkpoint, write_checkpoint_rank with streamed sections
// that copy with checkpoint::copy_in_parallel, commit_checkpoint), on a given number of threads; and
// what the write path costs one core per byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/storage/storage.h"
#include "common/common.h"

namespace tierzero::tools {

// A synthetic optimizer state: three fp32 states (master, exp_avg, exp_avg_sq) of `numel` elements,
// each element a distinct value, saved piece by piece as a compact optimizer's records are.
class SaveCopyState {
 public:
  // About `bytes` in all (a whole number of 256-element blocks per state).
  explicit SaveCopyState(uint64_t bytes);
  uint64_t numel() const { return numel_; }
  uint64_t bytes() const { return 3 * numel_ * sizeof(float); }
  std::span<const std::byte> state(int s) const;

 private:
  uint64_t numel_ = 0;
  std::vector<float> values_;  // the three states back to back
};

struct SaveCopyResult {
  double copy_seconds = 0;   // from the first byte copied into a staging buffer to the last
  double write_seconds = 0;  // from the write's start until the rank file was written and synced
  double commit_seconds = 0;
  bool equal = false;  // the checkpoint read back (its checksums checked) holds the state's bytes
};

// Saves `state` as checkpoint `tag` under `dir` through `buffers` (as many bytes as the rank file, so
// the copy never waits for the disk) with the copies on `threads` threads; reads it back to compare.
Result<SaveCopyResult> run_save_copy(const SaveCopyState& state, const checkpoint::WriteBuffers& buffers,
                                     const std::string& dir, const std::string& tag, int threads);

// One core's rates over `bytes` (memory to memory, 16 MiB pieces as the staging buffers take them).
struct ByteCosts {
  double memcpy_gbps = 0;  // the copy into a staging buffer
  double xxh3_gbps = 0;    // one XXH3 pass (the checksum)
  // The former fill: each piece copied, then hashed twice (its section and the file), on one thread.
  double copy_and_two_hashes_gbps = 0;
};
ByteCosts measure_byte_costs(std::span<const std::byte> bytes);

}  // namespace tierzero::tools
