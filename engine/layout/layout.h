// The offloaded step's state layout, in bytes: what one optimizer sub-group's record holds, how many
// records stay in pinned memory (tierzero.optimizer_records_in_memory), every pinned buffer the step
// holds (typed by role: offload::PinnedBufferSpec), the swap files' bytes on NVMe, and a LoRA run's
// frozen base pinned or on NVMe. The one place of this arithmetic: engine/zero allocates with it
// (zero_engine.cpp hands the list to HostTier) and engine/plan plans with it (`tierzero estimate`),
// so estimate and train agree to the byte by construction (tests/engine/layout checks them against
// a real engine). The codecs that read and write these bytes (engine/zero's record_adam.cpp
// record parts, nvme_params.cpp, engine/model's frozen_disk.cpp) check their buffers against the
// sizes given here; a change of a codec's layout belongs here first.
//
// A record (one sub-group of sub_group_size elements, the last one possibly shorter) holds, in this
// order: the master (fp32, 4 B/element; compact: a 16-bit residual, 2 B/element, the bf16 compute
// weights holding the other half), then m and v (fp32 4 + 4, bf16 2 + 2, or 8-bit blockwise codes
// 1 + 1 with one fp32 scale per kMomentBlock elements of the record for each of them, the last block
// possibly short).
//
// Records in memory: the first N sub-groups' records live in one pinned block (back to back, each
// its own bytes: the short last one too, when N covers it) all the time and are neither read nor
// written on NVMe (no swap file holds them); the swap files hold the others (each preallocated as a
// whole record); those are streamed through the offload_optimizer.buffer_count swap buffers
// (DeepSpeed's meaning, N = 0): passes alternate direction, the last buffer_count streamed records of
// a pass stay in the buffers, so a step reads and writes the streamed records beyond those (the
// partial last sub-group counted as it is). N = kRecordsInMemoryByBudget: as many records as the
// pinned budget has room for beside every other pinned buffer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "offload/offload.h"

namespace tierzero::engine::state_layout {

// Elements of an 8-bit moment block (cpu_adam::kMomentBlock): m and v have one fp32 scale each.
inline constexpr int64_t kMomentBlock = 256;
// optimizer_records_in_memory: as many records as the pinned budget holds (ZeroEngineOptions'
// kRecordsByBudget, ds_config "auto").
inline constexpr int64_t kRecordsInMemoryByBudget = -1;
// ZeroEngineOptions::grad_staging_slot_bytes's default: a gradient staging slot holds at most this.
inline constexpr uint64_t kStagingSlotBytes = 64 << 20;

enum class Moments : uint8_t { kFp32, kBf16, kInt8Blockwise };

// The parts of a record, in their order in it (RecordPart s is the optimizer's state s; the scales
// exist with 8-bit moments only).
enum class RecordPart : uint8_t { kMaster, kExpAvg, kExpAvgSq, kExpAvgScales, kExpAvgSqScales, kEnd };

struct Layout {
  bool compact_master = false;  // tierzero.master_weights "compact"
  Moments moments = Moments::kFp32;

  // Bytes of one moment (m or v) element, without the block scales: 4, 2, or 1 (8-bit codes).
  constexpr int64_t moment_element_bytes() const {
    return moments == Moments::kFp32 ? 4 : moments == Moments::kBf16 ? 2 : 1;
  }
  // Bytes of one element of `part`: the master 4 (compact: its int16 residual, 2), a moment
  // moment_element_bytes(), a block scale 4.
  constexpr int64_t element_bytes(RecordPart part) const {
    return part == RecordPart::kMaster     ? (compact_master ? 2 : 4)
           : part <= RecordPart::kExpAvgSq ? moment_element_bytes()
                                           : 4;
  }
  // Bytes the CPU Adam reads and writes for one parameter, each once: the master (fp32 4; compact:
  // the bf16 weight and its int16 residual, 4), a gradient of `grad_bytes`, m and v (8-bit: a code
  // and its share of the block's fp32 scale), and beside an fp32 master the bf16 weight it writes.
  // Read master, gradient, m, v; write master, m, v (+ the bf16 weight): compact + int8 + bf16
  // gradients 14.0625, fp32 + fp32 + fp32 gradients 30.
  constexpr double cpu_step_bytes(int grad_bytes) const {
    const double moment =
        static_cast<double>(moment_element_bytes()) + (moments == Moments::kInt8Blockwise ? 4.0 / kMomentBlock : 0.0);
    return (4.0 + grad_bytes + 2 * moment) + (4.0 + 2 * moment) + (compact_master ? 0.0 : 2.0);
  }
  // 8-bit moments: the fp32 scale blocks of `numel` elements (for each of m and v); else 0.
  constexpr int64_t scale_blocks(int64_t numel) const {
    return moments == Moments::kInt8Blockwise ? (numel + kMomentBlock - 1) / kMomentBlock : 0;
  }
  // Elements of `part` in a record of `numel`: numel, or its scale blocks.
  constexpr int64_t part_elements(RecordPart part, int64_t numel) const {
    return part <= RecordPart::kExpAvgSq ? numel : part == RecordPart::kEnd ? 0 : scale_blocks(numel);
  }
  constexpr int64_t part_bytes(RecordPart part, int64_t numel) const {
    return part_elements(part, numel) * element_bytes(part);
  }
  // Byte offset of `part` in a record of `numel` elements (kEnd: the record's bytes).
  constexpr int64_t part_offset(RecordPart part, int64_t numel) const {
    int64_t bytes = 0;
    for (auto p = RecordPart::kMaster; p < part; p = static_cast<RecordPart>(static_cast<int>(p) + 1))
      bytes += part_bytes(p, numel);
    return bytes;
  }
  // Bytes of the master part of `numel` elements: 4 or 2 each.
  constexpr int64_t master_bytes(int64_t numel) const { return part_bytes(RecordPart::kMaster, numel); }
  // Bytes of m and v of `numel` elements of one record, their block scales included.
  constexpr int64_t moment_bytes(int64_t numel) const {
    return part_offset(RecordPart::kEnd, numel) - master_bytes(numel);
  }
  // Bytes of one record of `numel` elements.
  constexpr int64_t record_bytes(int64_t numel) const { return part_offset(RecordPart::kEnd, numel); }
};

// The records of a partition of `partition` elements in sub-groups of `sub_group` (clamped to
// [1, partition]).
struct Records {
  int64_t partition = 0;
  int64_t sub_group = 1;

  constexpr int64_t group() const { return std::max<int64_t>(1, std::min(sub_group, partition)); }
  constexpr int64_t count() const { return partition <= 0 ? 0 : (partition + group() - 1) / group(); }
  // Elements of record k (the last one may be short).
  constexpr int64_t numel(int64_t k) const { return std::min(group(), partition - k * group()); }
  // Elements of the first `n` records (those kept in memory).
  constexpr int64_t first_numel(int64_t n) const { return std::min(partition, n * group()); }
  // Bytes of records [first, last) under `layout` (clamped to the records there are).
  constexpr int64_t bytes(const Layout& layout, int64_t first, int64_t last) const {
    first = std::clamp<int64_t>(first, 0, count());
    last = std::clamp<int64_t>(last, first, count());
    if (first == last) return 0;
    const int64_t full = last - 1 - first;  // every record but the last one of the range is whole
    return full * layout.record_bytes(group()) + layout.record_bytes(numel(last - 1));
  }
};

// Bytes a step reads from NVMe, and as many it writes: the streamed records beyond the
// `buffer_count` the swap buffers keep between passes (a front-to-back pass; the back-to-front one
// moves as many records, the short last one replaced by a whole one). A step inside the backward
// runs every pass back to front (the gradients' order), so the records a pass leaves in the buffers
// are evicted before the next one comes back to them: it moves every streamed record (buffer_count 0).
constexpr int64_t streamed_bytes_per_step(const Layout& layout, const Records& records, int64_t in_memory,
                                          int64_t buffer_count) {
  return records.bytes(layout, in_memory + std::max<int64_t>(buffer_count, 0), records.count());
}

// What sizes one rank's offloaded step: the engine fills it from ZeroEngineOptions and its partition
// layout, the planner from the ds_config and the model's shapes.
struct HostShape {
  int64_t partition = 0;  // elements of this rank's partition (optimizer state, gradients)
  int64_t landing = 0;    // elements of the largest reduced bucket this rank lands
  int64_t sub_group_size = 1;  // zero_optimization.sub_group_size
  Layout layout;               // the offloaded optimizer's state
  bool optimizer_offloaded = false;  // offload_optimizer "cpu" or "nvme"
  bool optimizer_nvme = false;       // offload_optimizer "nvme" (optimizer_offloaded too)
  int optimizer_buffers = 0;         // offload_optimizer.buffer_count: the NVMe swap buffers
  int staging_slots = 0;             // gradient staging slots (offload_optimizer.buffer_count)
  uint64_t staging_slot_bytes = kStagingSlotBytes;  // ZeroEngineOptions::grad_staging_slot_bytes
  int host_grad_bytes = 4;  // tierzero.offload_grad_dtype: the host gradient partition's element
  // tierzero.grad_ring_records: the host gradients land in this many record-sized slots instead of
  // the whole partition (engine/zero's host_grad_pipeline.h); 0: the partition.
  int64_t grad_ring_records = 0;
  int compute_bytes = 2;    // the compute dtype's element
  // 16-bit compute weights on a GPU with the parameters not offloaded: the optimizer writes them
  // into a pinned buffer bound for the device (a host compute partition is written in place).
  bool weights16_for_device = false;
  bool params_nvme = false;        // offload_param "nvme" (stage 3)
  int param_buffers = 0;           // offload_param.buffer_count
  int64_t param_buffer_numel = 0;  // offload_param.buffer_size
  int64_t params_max_in_cpu = 0;   // offload_param.max_in_cpu
  bool params_pinned = false;      // offload_param "cpu" with pin_memory: the shard pinned
  double gpu_optimizer_share = 0.0;  // tierzero.gpu_optimizer_share: the elements the device steps

  Records records() const { return {.partition = partition, .sub_group = sub_group_size}; }
};

// Elements of a reduced gradient bucket as the engine cuts them: one rank reduces nothing, so with
// the optimizer offloaded a bucket holds at most a staging slot's fp32 elements and lands while
// backward goes on; else reduce_bucket_size (`requested`) as given.
int64_t reduce_bucket_numel(int64_t requested, bool optimizer_offloaded, int world, uint64_t staging_slot_bytes);
// Elements of the largest bucket this rank lands, of a partition of `partition`, with buckets of
// `bucket` elements (at least 1), over `world` ranks: stage 3, the shards of the parameters a bucket
// holds together (ceil(bucket / world) + one element of padding for each of the `slots` parameters)
// or of one larger parameter (`largest`: its shard); stages 1-2, a flat range of `bucket` or one
// larger parameter (`largest`).
int64_t landing_numel(int stage, int64_t partition, int64_t bucket, int world, int64_t slots, int64_t largest);

// Why the offloaded optimizer cannot step inside the window's backward (engine/zero's
// backward_step.h), or nullptr when it can: it needs one rank at stage 3 handing its landed
// gradients over (`one_rank_stage3`), the parameters not on NVMe (they are read and written through
// the same buffers), no gradient clipping and no fp16 (both need the whole gradient first).
const char* step_in_backward_refusal(bool one_rank_stage3, bool params_nvme, double gradient_clipping, bool fp16);

// Bytes of one gradient staging slot: the largest bucket landed in fp32 (a device accumulator lands
// fp32 sums; 16-bit buckets are cut at the same elements), at most staging_slot_bytes (the pipeline
// lands a larger bucket piece by piece), a multiple of 8 bytes, at least 8.
int64_t staging_slot_bytes(const HostShape& shape);
// Bytes of one NVMe parameter read buffer of `buffer_numel` elements of `element_bytes`: the record
// ring's (offload::RecordRing::read_buffer_bytes: rounded up to RecordStaging::kRecordAlignment, plus one
// alignment unit at each end, as a read starts and ends on a 4096-byte boundary of the record).
int64_t param_read_buffer_bytes(int64_t buffer_numel, int element_bytes);
// Parameters on NVMe: the shard's records offload_param.max_in_cpu keeps in pinned memory (whole
// records of `record_numel` from the front).
int64_t param_records_in_memory(int64_t max_in_cpu, int64_t shard_numel, int64_t record_numel);

// ---- The optimizer's GPU share (tierzero.gpu_optimizer_share; engine/zero's device_share.h) ------
// The device steps its pieces a chunk at a time through kGpuShareQueues slots of device memory (one
// per queue: a chunk's upload runs beside another's download), each holding a chunk's gradients, bf16
// weights and record parts, every part at a multiple of kGpuShareAlignment bytes.
inline constexpr int kGpuShareQueues = 2;
inline constexpr int64_t kGpuShareChunk = int64_t{1} << 24;  // elements of a full chunk (64 moment blocks x 1024)
inline constexpr int64_t kGpuShareAlignment = 256;

// A slot's byte offsets: the gradients, the bf16 weights, then the record's parts (RecordPart order);
// `bytes` in all.
struct GpuShareSlot {
  int64_t grads = 0;
  int64_t weights = 0;
  int64_t parts[static_cast<int>(RecordPart::kEnd)] = {};
  int64_t bytes = 0;
};
// The slot of `numel` elements of `layout` with gradients of `grad_bytes` each.
constexpr GpuShareSlot gpu_share_slot(const Layout& layout, int grad_bytes, int64_t numel) {
  const auto aligned = [](int64_t bytes) {
    return (bytes + kGpuShareAlignment - 1) / kGpuShareAlignment * kGpuShareAlignment;
  };
  GpuShareSlot slot;
  slot.weights = aligned(grad_bytes * numel);
  int64_t at = slot.weights + aligned(2 * numel);
  for (int p = 0; p < static_cast<int>(RecordPart::kEnd); ++p) {
    slot.parts[p] = at;
    at += aligned(layout.part_bytes(static_cast<RecordPart>(p), numel));
  }
  slot.bytes = at;
  return slot;
}
// Elements of a slot for a partition in `records`: kGpuShareChunk, or a sub-group rounded up to whole
// moment blocks when that is smaller.
constexpr int64_t gpu_share_chunk(const Records& records) {
  const int64_t group = (records.group() + kMomentBlock - 1) / kMomentBlock * kMomentBlock;
  return std::min(kGpuShareChunk, group);
}
// Bytes of device memory the GPU share holds all run (0 without one: share 0 or no offloaded optimizer).
constexpr uint64_t gpu_share_device_bytes(const HostShape& shape) {
  if (shape.gpu_optimizer_share <= 0 || !shape.optimizer_offloaded) return 0;
  return static_cast<uint64_t>(kGpuShareQueues) *
         static_cast<uint64_t>(
             gpu_share_slot(shape.layout, shape.host_grad_bytes, gpu_share_chunk(shape.records())).bytes);
}

// ---- What the engine adds on the GPU where it finds room ---------------------------------------
// The device gradient accumulator and the forward window (engine/zero's offloaded_grads.h,
// forward_window.h) are decided with these; the planner (`tierzero estimate`) reports what they decide.

// The room: on a GPU, the budget (tierzero.gpu_memory_limit, else the GPU's memory; 0: not known —
// the planner without a GPU figure — and anything fits) beside the planned allocated peak without
// them (0: not known — then `extra` must fit a quarter of the budget). Off the GPU anything fits.
struct GpuRoom {
  bool on_gpu = false;
  uint64_t budget = 0;
  uint64_t planned_peak = 0;

  constexpr bool fits(uint64_t extra) const {
    if (!on_gpu || budget == 0) return true;
    return planned_peak > 0 ? planned_peak + extra <= budget : extra <= budget / 4;
  }
};

// Where an offloaded step accumulates micro-batches (tierzero.offload_grad_accumulator): kHost lands
// every micro-batch's buckets; kDevice sums micro-batches 1..A-1 in an fp32 accumulator of the
// partition on the compute device (accumulator_bytes) and lands the last; kAuto: kDevice on a GPU
// with several micro-batches a step when the accumulator fits the room.
enum class GradAccumulator : uint8_t { kHost, kDevice, kAuto };
enum class AccumulatorReason : uint8_t { kAsked, kOneMicroBatch, kNoGpu, kRoom };  // why, for kAuto's three
struct AccumulatorChoice {
  bool on_device = false;
  AccumulatorReason why = AccumulatorReason::kAsked;
};
constexpr uint64_t accumulator_bytes(int64_t partition) {
  return partition > 0 ? 4 * static_cast<uint64_t>(partition) : 0;
}
// The choice for `requested` with `accumulation_steps` micro-batches a step, a partition of
// `partition` elements and `room`. kDevice is honoured as asked, with one micro-batch or no GPU too.
constexpr AccumulatorChoice grad_accumulator(GradAccumulator requested, int64_t accumulation_steps, int64_t partition,
                                             const GpuRoom& room) {
  if (requested != GradAccumulator::kAuto) return {requested == GradAccumulator::kDevice, AccumulatorReason::kAsked};
  if (accumulation_steps <= 1) return {false, AccumulatorReason::kOneMicroBatch};
  if (!room.on_gpu) return {false, AccumulatorReason::kNoGpu};
  return {room.fits(accumulator_bytes(partition)), AccumulatorReason::kRoom};
}

// Every pinned buffer of the offloaded step: with device "cpu" every sub-group record in one block,
// with the state on NVMe the first `records_in_memory` (Records::bytes of them: a block spreading as
// many records over the partition, the last one streamed, holds whole records only, as many bytes).
// Buffers of 0 bytes are listed (the engine looks them up).
std::vector<offload::PinnedBufferSpec> pinned_buffers(const HostShape& shape, int64_t records_in_memory);

// The records kept in pinned memory for optimizer_records_in_memory = `requested` (>= 0, or
// kRecordsInMemoryByBudget): 0 without the state on NVMe; `requested` capped at the record count;
// by budget, the most whose list's pinned_capacity fits `pinned_limit_bytes` (0 without a limit).
int64_t records_in_memory(const HostShape& shape, int64_t requested, uint64_t pinned_limit_bytes);

// The pinned limit left for the step's own pool when other pools (a LoRA run's pinned frozen base)
// took `taken` bytes of tierzero.pinned_memory_limit `pinned_limit_bytes`: 0 (no limit) stays 0; a
// limit used up leaves 1 byte, which no buffer fits.
uint64_t pool_limit_after(uint64_t pinned_limit_bytes, uint64_t taken);

// Bytes the swap files take on disk, per role: the optimizer's streamed records (none when all are
// in memory) over `optimizer_paths` paths, the parameter shard's records over `param_paths`.
struct SwapBytes {
  uint64_t optimizer = 0;
  uint64_t params = 0;
};
SwapBytes swap_bytes(const HostShape& shape, int64_t records_in_memory, size_t optimizer_paths, size_t param_paths);

// ---- A LoRA run's frozen base -------------------------------------------------------------------
// Pinned (offload_param "cpu" with pin_memory): one pinned buffer per weight, `element_bytes` each
// element (role kFrozenWeight, index: the parameter's position), in a pool of its own checked
// against tierzero.pinned_memory_limit.
std::vector<offload::PinnedBufferSpec> frozen_pinned_buffers(const std::vector<int64_t>& param_numels,
                                                             int element_bytes);

// On NVMe (offload_param "nvme"; engine/model's frozen_disk.h): each unit's weights back to back,
// each at a multiple of kFrozenTensorAlignment, the unit rounded up to 4096; the swap files in
// records of `chunk_bytes` (max_record_bytes rounded up to 4096, or the largest unit when smaller),
// a unit in consecutive records; read through two staging halves of the largest unit.
inline constexpr uint64_t kFrozenTensorAlignment = 64;
inline constexpr uint64_t kFrozenMaxRecordBytes = 32ull << 20;
struct FrozenDiskLayout {
  std::vector<std::vector<uint64_t>> offsets;  // each unit's parameters' byte offsets
  std::vector<uint64_t> unit_bytes;            // each unit's bytes, rounded up to 4096
  uint64_t chunk_bytes = 0;                    // a record's bytes
  int64_t records = 0;
  uint64_t chunks_per_half = 0;  // records of a staging half: the largest unit's
};
// `units`: each unit's parameters' element counts, in the model's order (a parameter of two units in
// both).
FrozenDiskLayout frozen_disk_layout(const std::vector<std::vector<int64_t>>& units, int element_bytes,
                                    uint64_t max_record_bytes = kFrozenMaxRecordBytes);
// The two staging halves (role kFrozenStaging), each the largest unit's records, in a pool of their
// own checked against tierzero.pinned_memory_limit.
std::vector<offload::PinnedBufferSpec> frozen_staging_buffers(const FrozenDiskLayout& layout);
// Bytes the frozen base's swap files take over `paths` paths.
uint64_t frozen_swap_bytes(const FrozenDiskLayout& layout, size_t paths);

}  // namespace tierzero::engine::state_layout
