// Parameters homed on NVMe: reads of a gather's pieces through the pinned buffer ring, writes of
// the optimizer's windows (nvme_params.h).
#include "engine/zero/internal/nvme_params.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/layout/layout.h"

namespace tierzero::engine {

int64_t NvmeParams::element_bytes() const { return static_cast<int64_t>(c10::elementSize(setup_.dtype)); }

std::unique_ptr<NvmeParams> NvmeParams::create(NvmeParamsSetup setup) {
  const NvmeParamOptions& options = setup.options;
  if (options.buffer_count < 1 || setup.read_buffers.size() != static_cast<size_t>(options.buffer_count))
    throw Error(invalid_argument("zero_optimization.offload_param.buffer_count=" +
                                 std::to_string(options.buffer_count) + " must be at least 1"));
  if (options.buffer_numel < 1)
    throw Error(invalid_argument("zero_optimization.offload_param.buffer_size=" + std::to_string(options.buffer_numel) +
                                 " must be at least 1"));
  if (setup.record_numel < 1 || setup.windows.size() != 2)
    throw Error(internal_error("nvme parameters: no record size or not two write windows"));
  std::unique_ptr<NvmeParams> params(new NvmeParams(std::move(setup)));
  const NvmeParamsSetup& s = params->setup_;
  const int64_t records = (s.shard_numel + s.record_numel - 1) / s.record_numel;
  std::vector<std::span<std::byte>> reads, windows;
  for (const at::Tensor& buffer : s.read_buffers) {
    if (buffer.nbytes() != static_cast<size_t>(state_layout::param_read_buffer_bytes(
                               s.options.buffer_numel, static_cast<int>(params->element_bytes()))))
      throw Error(internal_error("nvme parameters: a read buffer is not param_read_buffer_bytes()"));
    reads.push_back(bytes_of(buffer));
  }
  for (const at::Tensor& window : s.windows) {
    if (window.nbytes() != static_cast<size_t>(s.record_numel * params->element_bytes()))
      throw Error(internal_error("nvme parameters: a write window is not a record"));
    windows.push_back(bytes_of(window));
  }
  const int64_t host_records =
      state_layout::param_records_in_memory(s.options.max_in_cpu, s.shard_numel, s.record_numel);
  params->host_numel_ = std::min(s.shard_numel, host_records * s.record_numel);
  if (s.host_records.numel() != host_records * s.record_numel ||
      (host_records > 0 && s.host_records.scalar_type() != s.dtype))
    throw Error(internal_error("nvme parameters: the host records are not param_records_in_memory() records"));
  const int64_t last_numel = s.shard_numel - (records - 1) * s.record_numel;
  params->ring_ = value_or_throw(
      offload::RecordRing::create(reads, windows,
                                  {.paths = s.options.paths,
                                   .io = s.options.io,
                                   .rank = s.rank,
                                   .records = std::max<int64_t>(1, records),
                                   .record_bytes = static_cast<uint64_t>(s.record_numel * params->element_bytes()),
                                   .role = kParameterSwap},
                                  static_cast<uint64_t>(std::max<int64_t>(0, last_numel) * params->element_bytes())));
  return params;
}

NvmeParams::~NvmeParams() = default;  // the ring waits for its readers and writes

void NvmeParams::write_all(const std::function<void(int64_t begin, const at::Tensor& window)>& fill) {
  // A write still in flight from the last optimizer step may be to a record rewritten here.
  throw_if_error(ring_->wait_writes());
  std::vector<PartitionWrite> writes;
  for (int64_t begin = 0; begin < setup_.shard_numel; begin += setup_.record_numel) {
    const int64_t count = std::min(setup_.record_numel, setup_.shard_numel - begin);
    fill(begin, lend(begin, count));
    writes.push_back(send(begin, count));
  }
  for (PartitionWrite& write : writes) write.done->wait_host();
}

// ---- Reads --------------------------------------------------------------------------------------

std::vector<std::pair<int64_t, int64_t>> shard_ranges(const ShardedLayout& layout, const std::vector<size_t>& slots) {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (size_t slot : slots) {
    const ShardSlot& param = layout.slots[slot];
    if (param.shard_numel == 0) continue;
    if (!ranges.empty() && ranges.back().second == param.shard_offset) {
      ranges.back().second += param.shard_numel;
    } else {
      ranges.emplace_back(param.shard_offset, param.shard_offset + param.shard_numel);
    }
  }
  return ranges;
}

std::vector<ParamReadPiece> cut_reads(const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t record_numel,
                                      int64_t buffer_numel) {
  std::vector<ParamReadPiece> pieces;
  int64_t dst = 0;
  for (const auto& [first, end] : ranges) {
    for (int64_t begin = first; begin < end;) {
      const int64_t record_end = (begin / record_numel + 1) * record_numel;
      const int64_t count = std::min({end, record_end, begin + buffer_numel}) - begin;
      pieces.push_back({.begin = begin, .count = count, .dst_offset = dst, .buffer = -1, .skip = 0});
      begin += count;
      dst += count;
    }
  }
  return pieces;
}

Status check_read_buffers(const ShardedLayout& layout, const std::vector<std::vector<size_t>>& unit_slots,
                          int64_t persistence_threshold, int64_t record_numel, const NvmeParamOptions& options,
                          int rank) {
  for (size_t unit = 0; unit < unit_slots.size(); ++unit) {
    std::vector<size_t> slots;
    int64_t numel = 0;
    for (size_t slot : unit_slots[unit])
      if (layout.slots[slot].numel > persistence_threshold &&
          std::find(slots.begin(), slots.end(), slot) == slots.end()) {
        slots.push_back(slot);
        numel += layout.slots[slot].shard_numel;
      }
    const size_t pieces = cut_reads(shard_ranges(layout, slots), record_numel, options.buffer_numel).size();
    if (pieces > static_cast<size_t>(options.buffer_count))
      return invalid_argument("rank " + std::to_string(rank) + ": unit " + std::to_string(unit) +
                              "'s parameter shard (" + std::to_string(numel) + " elements) is read from NVMe in " +
                              std::to_string(pieces) +
                              " pieces (at most one sub-group and buffer_size each) but "
                              "zero_optimization.offload_param.buffer_count is " +
                              std::to_string(options.buffer_count) + "; raise offload_param.buffer_count to " +
                              std::to_string(pieces) + " or raise offload_param.buffer_size / sub_group_size");
  }
  return Status();
}

std::vector<ParamReadPiece> NvmeParams::cut(const std::vector<std::pair<int64_t, int64_t>>& ranges) const {
  return cut_reads(ranges, setup_.record_numel, setup_.options.buffer_numel);
}

std::vector<uint64_t> NvmeParams::holders_of_next(const std::vector<ParamReadPiece>& pieces) const {
  return ring_->holders_of_next(static_cast<size_t>(
      std::count_if(pieces.begin(), pieces.end(), [&](const ParamReadPiece& p) { return !in_host(p.begin); })));
}

std::pair<int64_t, uint64_t> NvmeParams::locate(int64_t e) const {
  const int64_t k = e / setup_.record_numel;
  return {k, static_cast<uint64_t>((e - k * setup_.record_numel) * element_bytes())};
}

ParamRead NvmeParams::start_read(std::vector<ParamReadPiece> pieces, uint64_t tag) {
  if (pieces.size() > ring_->read_buffers())
    throw Error(internal_error("nvme parameters: a read of " + std::to_string(pieces.size()) + " pieces for " +
                               std::to_string(ring_->read_buffers()) + " buffers"));
  ParamRead read{.pieces = std::move(pieces)};
  for (ParamReadPiece& piece : read.pieces) {
    if (in_host(piece.begin)) continue;  // buffer -1: copied from the host records
    const auto [k, first] = locate(piece.begin);
    const offload::RingPiece placed =
        value_or_throw(ring_->read(k, first, first + static_cast<uint64_t>(piece.count * element_bytes()), tag));
    piece.buffer = static_cast<int>(placed.buffer);
    piece.skip = placed.skip;
  }
  return read;
}

bool NvmeParams::arrived(const ParamRead& read) const {
  return std::all_of(read.pieces.begin(), read.pieces.end(), [this](const ParamReadPiece& piece) {
    return piece.buffer < 0 || ring_->arrived(static_cast<size_t>(piece.buffer));
  });
}

std::shared_ptr<CopyDone> NvmeParams::land(ParamRead& read, const at::Tensor& dst, DeviceCopies& copies) {
  Status first;
  for (const ParamReadPiece& piece : read.pieces) {
    if (piece.buffer < 0) continue;
    Status status = ring_->wait_read(static_cast<size_t>(piece.buffer));
    if (first.ok()) first = status;
  }
  std::shared_ptr<CopyDone> last;
  for (ParamReadPiece& piece : read.pieces) {
    const auto b = static_cast<size_t>(piece.buffer);
    const std::byte* src = piece.buffer < 0 ? static_cast<const std::byte*>(setup_.host_records.const_data_ptr()) +
                                                  piece.begin * element_bytes()
                                            : ring_->bytes(b) + piece.skip;
    std::shared_ptr<CopyDone> copy;
    if (first.ok()) copy = last = copies.to_device(dst.narrow(0, piece.dst_offset, piece.count), src);
    if (piece.buffer >= 0) ring_->release(b, copy);
  }
  throw_if_error(first);
  return last;
}

// ---- Writes -------------------------------------------------------------------------------------

at::Tensor NvmeParams::lend(int64_t begin, int64_t count) {
  if (count > setup_.record_numel || begin / setup_.record_numel != (begin + count - 1) / setup_.record_numel)
    throw Error(internal_error("nvme parameters: a window of " + std::to_string(count) + " elements at " +
                               std::to_string(begin) + " crosses a record of " + std::to_string(setup_.record_numel)));
  if (in_host(begin)) return setup_.host_records.narrow(0, begin, count);  // stepped in place
  const auto [k, first] = locate(begin);
  const size_t window = value_or_throw(ring_->lend(k, first, first + static_cast<uint64_t>(count * element_bytes())));
  return setup_.windows[window].narrow(0, 0, count * element_bytes()).view(setup_.dtype);
}

PartitionWrite NvmeParams::send(int64_t begin, int64_t count) {
  if (in_host(begin)) return {begin, count, offload::host_done(nullptr)};
  const auto [k, first] = locate(begin);
  return {begin, count,
          offload::host_done(
              value_or_throw(ring_->write(k, first, first + static_cast<uint64_t>(count * element_bytes()))))};
}

}  // namespace tierzero::engine
