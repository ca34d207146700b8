// Resharding a tierzero engine checkpoint to another world size, as a new checkpoint.
//
// Every flat group's every state (fp32 master, exp_avg, exp_avg_sq, ...) is re-partitioned for the
// new world size by the reader (CheckpointReader::read_partition, which checks the source's
// checksums as it reads; an encoded state is decoded and encoded again at the new partitioning by
// encode_partition: the compact master exactly, 8-bit moments as new codes of the decoded values,
// not the stored ones), and written through the engine checkpoint writer's public protocol
// (begin_checkpoint, write_checkpoint_rank per rank, commit_checkpoint): new checksums, and a crash
// at any point leaves OUT without a published checkpoint (or with the previous one). One target
// rank is held in memory at a time: memory is about the checkpoint's state divided by the new
// world size, plus the replicated tensors for rank 0.
#pragma once

#include <cstdint>
#include <string>

#include "common/common.h"

namespace tierzero::checkpoint {

struct ReshardOptions {
  std::string tag;            // source tag (empty: SRC/latest's); the copy keeps it
  uint32_t world_size = 1;    // the new data-parallel world size, >= 1
  int compression_level = 0;  // 0: raw sections; 1..22: zstd, as CheckpointOptions
};

struct ReshardReport {
  std::string tag;
  uint32_t from_world_size = 0;
  uint32_t to_world_size = 0;
  uint64_t state_bytes = 0;  // partition bytes written, padding included
  double seconds = 0;
};

// Writes checkpoint `options.tag` of `src` as checkpoint of the same tag under `out` for
// options.world_size ranks: same stage, alignment, step, groups, replicated tensors, aliases and
// opaque training state (loss scaler, LR scheduler, data position, model config). Per-rank state
// (RNG, data loader) is kept for the ranks that existed, null for new ones. Returns
// kInvalidArgument for world size 0 or `out` naming `src`'s folder, the reader's errors (naming file,
// rank and section) for a damaged source, and the writer's for I/O; OUT/latest is set only when
// every rank file is durable.
Result<ReshardReport> reshard_engine_checkpoint(const std::string& src, const std::string& out,
                                                const ReshardOptions& options);

}  // namespace tierzero::checkpoint
