// The record optimizer: Adam with this rank's optimizer state offloaded (zero_optimization.
// offload_optimizer.device "cpu" or "nvme"), stepped on the CPU (cpu_adam) a piece at a time by
// offloaded_step.h's loop. The state is one record per sub-group of sub_group_size elements, laid out
// by engine/layout's state_layout::Layout (which the planner sizes records with too): the fp32 master,
// exp_avg and exp_avg_sq (fp32 or bf16), 12 or 8 bytes an element; with partition_optimizer.h's
// compact layouts as little as 4 + 8/256 (a compact master's int16 residual, its bf16 half the 16-bit
// weights in host memory; 8-bit moments with their block scales).
// The records live in offload/'s RecordCache: with device "cpu" every one in a pinned block (no swap
// file, no buffer); with "nvme" records_in_memory of them there (the first, or with spread_records
// spread over the partition) and the others in swap files, streamed through buffer_count pinned
// buffers in the cache's alternating sweep (read ahead with pipeline_read, written behind with
// pipeline_write; any buffer_count >= 1 is correct, read-ahead needs 2, full overlap 3; each pass moves
// buffer_count records fewer each way). A step runs the records in memory ahead of the first streamed
// one, then the others in the sweep's order; a record in memory in slices of kPublishSlice elements.
// A front-to-back pass publishes each piece as it finishes, a back-to-front one the partition at its
// end.
//
// Checkpoints stream (state_reader / load_state): a save reads one state's part of one record at a
// time (the next record's read queued while one is copied out); a load fills whole records and
// writes them behind; neither holds more than the buffers. A compact checkpoint (stored_readers /
// load_stored) reads or fills each record once, whole, as stored. state() still materialises: the
// first call after a step reads every record into three whole host tensors (O(partition) host
// memory, not pinned), read and written in place; the next step, save or read writes them back and
// frees them.
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

class NvmeParams;  // nvme_params.h

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

// What the record optimizer is given. After each piece's update its compute weights go back
// through `copies` (to a device: on the H2D side stream, while the next piece steps; to host memory:
// written in place by the kernel, or copied); the device copies are left for the caller to order
// reads after, piece by piece (device_writes()).
struct RecordAdamSetup {
  AdamConfig config;
  const cpu_adam::CpuAdam* adam = nullptr;  // outlives the optimizer
  DeviceCopies* copies = nullptr;           // outlives the optimizer
  int64_t sub_group_numel = 1'000'000'000;  // zero_optimization.sub_group_size
  bool time_copies = false;                 // measure the copies (waits for them at the step's end)
  // The 16-bit weights bound for a device compute partition, or empty when the compute partition is
  // fp32 or in host memory.
  at::Tensor params16;
  // Parameters on NVMe: where the new compute weights go (step()'s compute_partition is then
  // undefined); outlives the optimizer.
  NvmeParams* sink = nullptr;
  // The compact layouts (partition_optimizer.h's CompactState): with a compact master the record
  // holds the int16 residual instead of the fp32 master, and compact.hi (the partition's bf16
  // weights, in host memory) the high half; compact.moments_8bit must match state_dtype kChar.
  CompactState compact;
  // The rounding of the bf16 16-bit weights the fp32-master path writes (ZeroEngineOptions::
  // params16_rounding); the compact path always rounds ties away.
  cpu_adam::Bf16Rounding params16_rounding = cpu_adam::Bf16Rounding::kNearestEven;
  // The GPU share (tierzero.gpu_optimizer_share, device_share.h): the pieces it takes are stepped on
  // the device instead of by `adam` (null: none); outlives the optimizer.
  DeviceShare* device_share = nullptr;
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

// Creates the swap files and writes the initial state (master from `load_master`, zero moments)
// through the buffers (without paths: into the block). Throws tierzero::Error: an option out of range naming its key;
// the swap's errors (disk full with the bytes needed and free; a path that cannot be written, named with the fix).
std::unique_ptr<PartitionOptimizer> make_record_adam(RecordAdamSetup setup);

}  // namespace tierzero::engine
