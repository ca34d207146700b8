// The offloaded step's state layout (layout.h): the pinned buffer list, the records kept in memory,
// the swap files' bytes and the frozen base's.
#include "engine/layout/layout.h"

namespace tierzero::engine::state_layout {
namespace {

using offload::PinnedBufferSpec;
using offload::PinnedRole;
using offload::RecordStaging;

constexpr uint64_t kAlign = RecordStaging::kRecordAlignment;

uint64_t round_up(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }
uint64_t u(int64_t bytes) { return bytes > 0 ? static_cast<uint64_t>(bytes) : 0; }

}  // namespace

int64_t reduce_bucket_numel(int64_t requested, bool optimizer_offloaded, int world, uint64_t staging_slot_bytes) {
  if (!optimizer_offloaded || world != 1) return requested;
  return std::min<int64_t>(requested, std::max<int64_t>(1, static_cast<int64_t>(staging_slot_bytes / sizeof(float))));
}

int64_t landing_numel(int stage, int64_t partition, int64_t bucket, int world, int64_t slots, int64_t largest) {
  bucket = std::max<int64_t>(bucket, 1);
  if (stage == 3) return std::min(partition, std::max((bucket + world - 1) / world + slots, largest));
  return std::min(partition, std::max(bucket, largest));
}

const char* step_in_backward_refusal(bool one_rank_stage3, bool params_nvme, double gradient_clipping, bool fp16) {
  if (!one_rank_stage3) return "it needs one rank at stage 3";
  if (params_nvme) return "the parameters on NVMe are read and written through the same buffers";
  if (gradient_clipping > 0.0) return "gradient_clipping needs the whole gradient's norm before the first update";
  if (fp16) return "fp16's overflow check needs the whole gradient before the first update";
  return nullptr;
}

int64_t staging_slot_bytes(const HostShape& shape) {
  const int64_t landing_bytes = shape.landing * static_cast<int64_t>(sizeof(float));
  return std::max<int64_t>(8, std::min(landing_bytes, static_cast<int64_t>(shape.staging_slot_bytes)) / 8 * 8);
}

int64_t param_read_buffer_bytes(int64_t buffer_numel, int element_bytes) {
  return static_cast<int64_t>(offload::RecordRing::read_buffer_bytes(u(buffer_numel) * static_cast<uint64_t>(element_bytes)));
}

int64_t param_records_in_memory(int64_t max_in_cpu, int64_t shard_numel, int64_t record_numel) {
  const int64_t records = (shard_numel + record_numel - 1) / record_numel;
  return std::min(records, std::max<int64_t>(0, max_in_cpu) / record_numel);
}

std::vector<PinnedBufferSpec> pinned_buffers(const HostShape& s, int64_t records_in_memory) {
  const Records records = s.records();
  std::vector<PinnedBufferSpec> out;
  if (s.optimizer_offloaded) {
    if (s.optimizer_nvme) {  // one sub-group's master (or residual), m and v per buffer
      const uint64_t record = u(s.layout.record_bytes(records.group()));
      for (int i = 0; i < s.optimizer_buffers; ++i) out.push_back({PinnedRole::kOptimizerSwapBuffer, i, record});
    }
    // The records kept in memory; with the state in host memory ("cpu") every one.
    const int64_t kept = s.optimizer_nvme ? records_in_memory : records.count();
    out.push_back({PinnedRole::kOptimizerRecords, 0, u(records.bytes(s.layout, 0, kept))});
    if (s.grad_ring_records > 0) {  // the gradient ring: a record's gradients a slot
      for (int64_t i = 0; i < s.grad_ring_records; ++i)
        out.push_back({PinnedRole::kGradients, static_cast<int>(i), u(records.group() * s.host_grad_bytes)});
    } else {
      out.push_back({PinnedRole::kGradients, 0, u(s.partition * s.host_grad_bytes)});
    }
    for (int i = 0; i < s.staging_slots; ++i) out.push_back({PinnedRole::kGradStaging, i, u(staging_slot_bytes(s))});
    out.push_back({PinnedRole::kWeights16, 0, u(s.weights16_for_device ? 2 * s.partition : 0)});
  }
  if (s.params_nvme) {
    const uint64_t read = u(param_read_buffer_bytes(s.param_buffer_numel, s.compute_bytes));
    for (int i = 0; i < s.param_buffers; ++i) out.push_back({PinnedRole::kParamReadBuffer, i, read});
    const int64_t record = records.group();
    for (int i = 0; i < 2; ++i) out.push_back({PinnedRole::kParamWindow, i, u(record * s.compute_bytes)});
    out.push_back({PinnedRole::kParamRecords, 0,
                   u(param_records_in_memory(s.params_max_in_cpu, s.partition, record) * record * s.compute_bytes)});
  } else if (s.params_pinned) {
    out.push_back({PinnedRole::kParamShard, 0, u(s.partition * s.compute_bytes)});
  }
  return out;
}

int64_t records_in_memory(const HostShape& shape, int64_t requested, uint64_t pinned_limit_bytes) {
  if (!shape.optimizer_nvme || requested == 0) return 0;
  const Records records = shape.records();
  if (requested != kRecordsInMemoryByBudget) return std::min(requested, records.count());
  const uint64_t others = offload::pinned_capacity(pinned_buffers(shape, 0));
  const uint64_t record = u(shape.layout.record_bytes(records.group()));
  if (others >= pinned_limit_bytes || record == 0) return 0;
  // One more than whole records fit: the short last record may still fit.
  auto n = static_cast<int64_t>(
      std::min<uint64_t>((pinned_limit_bytes - others) / record + 1, static_cast<uint64_t>(records.count())));
  while (n > 0 && offload::pinned_capacity(pinned_buffers(shape, n)) > pinned_limit_bytes) --n;
  return n;
}

uint64_t pool_limit_after(uint64_t pinned_limit_bytes, uint64_t taken) {
  if (pinned_limit_bytes == 0) return 0;
  return pinned_limit_bytes > taken ? pinned_limit_bytes - taken : 1;
}

SwapBytes swap_bytes(const HostShape& shape, int64_t records_in_memory, size_t optimizer_paths, size_t param_paths) {
  const Records records = shape.records();
  SwapBytes bytes;
  if (shape.optimizer_nvme)
    bytes.optimizer = RecordStaging::preallocated_bytes(optimizer_paths, records.count() - records_in_memory,
                                                        u(shape.layout.record_bytes(records.group())));
  if (shape.params_nvme)  // at least one record, even for an empty shard
    bytes.params = RecordStaging::preallocated_bytes(param_paths, std::max<int64_t>(1, records.count()),
                                                     u(records.group() * shape.compute_bytes));
  return bytes;
}

std::vector<PinnedBufferSpec> frozen_pinned_buffers(const std::vector<int64_t>& param_numels, int element_bytes) {
  std::vector<PinnedBufferSpec> out;
  for (size_t i = 0; i < param_numels.size(); ++i)
    out.push_back({PinnedRole::kFrozenWeight, static_cast<int>(i), u(param_numels[i] * element_bytes)});
  return out;
}

FrozenDiskLayout frozen_disk_layout(const std::vector<std::vector<int64_t>>& units, int element_bytes,
                                    uint64_t max_record_bytes) {
  FrozenDiskLayout layout;
  for (const std::vector<int64_t>& unit : units) {
    std::vector<uint64_t> offsets;
    uint64_t used = 0;
    for (int64_t numel : unit) {
      offsets.push_back(used);
      used = round_up(used + u(numel) * static_cast<uint64_t>(element_bytes), kFrozenTensorAlignment);
    }
    layout.offsets.push_back(std::move(offsets));
    layout.unit_bytes.push_back(round_up(std::max<uint64_t>(used, 1), kAlign));
  }
  const uint64_t largest = *std::max_element(layout.unit_bytes.begin(), layout.unit_bytes.end());
  layout.chunk_bytes = std::min(round_up(max_record_bytes, kAlign), largest);
  for (uint64_t bytes : layout.unit_bytes)
    layout.records += static_cast<int64_t>((bytes + layout.chunk_bytes - 1) / layout.chunk_bytes);
  layout.chunks_per_half = (largest + layout.chunk_bytes - 1) / layout.chunk_bytes;
  return layout;
}

std::vector<PinnedBufferSpec> frozen_staging_buffers(const FrozenDiskLayout& layout) {
  const uint64_t half = layout.chunks_per_half * layout.chunk_bytes;
  return {{PinnedRole::kFrozenStaging, 0, half}, {PinnedRole::kFrozenStaging, 1, half}};
}

uint64_t frozen_swap_bytes(const FrozenDiskLayout& layout, size_t paths) {
  return RecordStaging::preallocated_bytes(paths, layout.records, layout.chunk_bytes);
}

}  // namespace tierzero::engine::state_layout
