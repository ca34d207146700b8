// Adam with this rank's optimizer state offloaded (zero_optimization.offload_optimizer.device "cpu",
// every record in pinned memory, or "nvme"): the fp32 master weights, exp_avg and exp_avg_sq (fp32, or bf16 with
// tierzero.optimizer_state_dtype) live in swap files (offload/'s RecordStaging, moved through its
// pinned buffers), one record per sub-group of sub_group_size elements (12 or 8 bytes an element;
// with the compact layouts of partition_optimizer.h's CompactState as little as 4 + 8/256: the
// int16 residual of a compact master, whose bf16 half stays in host memory as the 16-bit weights,
// and 8-bit moments with their block scales), and pass through `buffer_count` pinned host buffers.
// With records_in_memory = N (placement by budget) N records live in a pinned block instead: stepped
// there first, front to back, never read or written, and the swap files hold only the others (the
// passes below run over those). They are the first N, or, with spread_records (the step runs inside
// the backward, in the gradients' order, last to first), N spread over the partition, so that the
// disk keeps reading ahead and writing behind while they are stepped (offload.h's RecordCache). The records live in
// offload/'s RecordCache (the pinned block and the buffers behind one interface) and the byte layout of a record is
// engine/layout's state_layout::Layout (which the planner sizes records with too); the step is the
// CPU-offloaded optimizer's loop (offloaded_step.h) over the records. With device "cpu" (no
// nvme_path) every record lives in the block and there is no swap file and no buffer; a record in
// memory is stepped in slices of kPublishSlice elements. A step walks the sub-groups in order:
// sub-group k+1's record is read ahead (pipeline_read) while cpu_adam steps k, and k-1's is written behind
// (pipeline_write). Without the pipeline flags each read and write completes around its sub-group. Streamed sub-group k
// always uses buffer (k - N) mod buffer_count, and a read into a buffer waits for the write that last left it, so any
// buffer_count >= 1 is correct; read-ahead needs 2, full overlap 3. Passes alternate direction: a pass's last
// buffer_count sub-groups stay in their buffers, unwritten, and the next pass starts on them, so a step moves (groups -
// buffer_count) records each way instead of every record (with buffer_count >= groups, nothing after the first step). A
// back-to-front pass publishes the partition at its end, a front-to-back one each sub-group as it finishes. The kept
// records are written before a save or state() reads the files.
//
// Checkpoints stream (PartitionOptimizer::state_reader / load_state): a save reads one state's part
// of one sub-group's record at a time (from the part's start rounded down to 4096 bytes) into the
// pinned buffers, the next sub-group's read queued while one is copied out; a load fills whole
// records and writes them behind. Neither holds more than the buffers. A compact state's checkpoint
// (stored_readers / load_stored) reads or fills each record once, whole, as it is stored (the next
// record's read queued while one is copied out). state() still materialises:
// the first call after a step reads every sub-group into three whole host tensors (O(partition)
// host memory, not pinned), which callers read and write in place; the next step() (or a save)
// writes them back to NVMe and frees them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/zero/internal/partition_optimizer.h"
#include "nvme/io_engine.h"

namespace tierzero::engine {

// Where and how the optimizer state goes to NVMe (ds_config's offload_optimizer and aio blocks).
struct NvmeOptimizerOptions {
  std::vector<std::string> paths;  // offload_optimizer.nvme_path: directories; several stripe every
                                   // sub-group over them (a tierzero extension). Empty: not on NVMe
  int buffer_count = 4;            // offload_optimizer.buffer_count: pinned buffers of one sub-group's
                                   // state (12 or 8 bytes x sub_group_size each); at least 1
  bool pipeline_read = false;      // offload_optimizer.pipeline_read: read sub-groups ahead
  bool pipeline_write = false;     // offload_optimizer.pipeline_write: write sub-groups behind
  nvme::IoConfig io;               // the "aio" block
};

// NVMe traffic of the optimizer, in bytes.
struct NvmeTraffic {
  uint64_t step_read_bytes = 0;     // read by the last step() (and the state() it followed, if any)
  uint64_t step_written_bytes = 0;  // written by the last step() (records kept in the buffers are not)
  double step_wait_s = 0;           // the last step() blocked on the disk (reads, buffers' writes)
  uint64_t resident_bytes = 0;      // the swap files on disk
};

struct NvmeOffloadAdamSetup {
  // The sub-group loop's (offloaded_step.h). A compact master (common.compact.compact_master): the record
  // holds the int16 residual instead of the fp32 master, and compact.hi (the partition's bf16
  // weights, in host memory) the high half; compact.moments_8bit must match state_dtype kChar.
  OffloadedAdamSetup common;
  int rank = 0;                             // names the swap files
  at::ScalarType state_dtype = at::kFloat;  // exp_avg and exp_avg_sq: kFloat, kBFloat16, or kChar (8-bit
                                            // codes: int8 m, uint8 v, and their fp32 block scales)
  // Placement by budget (tierzero.optimizer_records_in_memory): records_in_memory sub-group records
  // (the first ones unless spread_records) live in `memory_records` (pinned bytes, records_in_memory records of
  // min(sub_group_numel, partition numel) elements each, engine/layout's record bytes, back to back)
  // and never touch the swap files, which hold only the others.
  // Without nvme.paths there is no swap file and no buffer: every record lives in memory_records
  // (records_in_memory and the other nvme options are not looked at).
  int64_t records_in_memory = 0;
  at::Tensor memory_records;
  bool spread_records = false;  // those records spread over the partition, the last one streamed
  NvmeOptimizerOptions nvme;
  // nvme.buffer_count pinned host byte buffers of one record of min(sub_group_numel, partition
  // numel) elements each (engine/layout's record bytes); outlive the optimizer. None without paths.
  std::vector<at::Tensor> buffers;
  int64_t numel = 0;  // this rank's partition
  // The initial master weights: elements [begin, begin + out.numel()) of the partition into `out`
  // (fp32, zero-filled: padding stays zero), called a piece at a time by the constructor only,
  // never for the whole partition at once.
  std::function<void(int64_t begin, const at::Tensor& out)> load_master;
};

class NvmeOffloadAdam : public PartitionOptimizer {
 public:
  // The traffic so far.
  virtual NvmeTraffic traffic() const = 0;
};

// Creates the swap files and writes the initial state (master from `load_master`, zero moments)
// through the buffers (without paths: into the block). Throws tierzero::Error: an option out of range naming its key;
// the swap's errors (disk full with the bytes needed and free; a path that cannot be written, named with the fix).
std::unique_ptr<NvmeOffloadAdam> make_nvme_offload_adam(NvmeOffloadAdamSetup setup);

}  // namespace tierzero::engine
