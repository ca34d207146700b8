// FrozenDisk (internal/frozen_disk.h): a LoRA run's frozen base in swap files on NVMe, each unit in
// consecutive fixed-size records, read back through two pinned staging halves.
#include "engine/model/internal/frozen_disk.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/accumulate.h>
#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <utility>

#include "engine/layout/layout.h"
#include "engine/model/internal/unit_order.h"

namespace tierzero::engine {
namespace {

// Parameter `spec`'s view into `record` (bytes, on any device) at `offset`.
at::Tensor view_in(const at::Tensor& record, uint64_t offset, const ParamSpec& spec, at::ScalarType dtype) {
  const auto bytes = static_cast<int64_t>(c10::multiply_integers(spec.shape) * at::elementSize(dtype));
  return record.narrow(0, static_cast<int64_t>(offset), bytes).view(dtype).view(spec.shape);
}

}  // namespace

Result<std::unique_ptr<FrozenDisk>> FrozenDisk::create(const std::vector<std::vector<ParamSpec>>& units,
                                                       at::ScalarType dtype, const FrozenPlacement& placement,
                                                       const ReadParam& read, uint64_t max_record_bytes,
                                                       at::Device device) {
  std::unique_ptr<FrozenDisk> disk(new FrozenDisk());
  disk->units_ = units;
  disk->dtype_ = dtype;
  const auto element = static_cast<int>(at::elementSize(dtype));
  std::vector<std::vector<int64_t>> numels;
  for (const std::vector<ParamSpec>& unit : units) {
    numels.emplace_back();
    for (const ParamSpec& spec : unit) numels.back().push_back(c10::multiply_integers(spec.shape));
    for (int64_t n : numels.back()) disk->bytes_ += n * element;
  }
  // The records and the staging halves as engine/layout sizes them (the planner too).
  state_layout::FrozenDiskLayout layout = state_layout::frozen_disk_layout(numels, element, max_record_bytes);
  disk->offsets_ = std::move(layout.offsets);
  disk->unit_bytes_ = std::move(layout.unit_bytes);
  disk->first_record_ = std::move(layout.first_record);
  disk->chunk_bytes_ = layout.chunk_bytes;
  disk->chunks_per_half_ = layout.chunks_per_half;
  const int64_t records = layout.records;
  // Two halves of the largest unit from a pool of their own (pinned for `device`, under
  // placement.pinned_limit_bytes), registered chunk by chunk: staging span h * chunks_per_half + c
  // holds chunk c of the unit in half h.
  try {
    disk->pool_ = offload::HostTier::create(state_layout::frozen_staging_buffers(layout), placement.pinned_limit_bytes,
                                            device, placement.rank);
  } catch (const Error& e) {
    return e.status().with_context("the LoRA base's NVMe staging (offload_param \"nvme\")");
  }
  std::vector<std::span<std::byte>> spans;
  for (int h = 0; h < 2; ++h) {
    disk->buffers_.push_back(disk->pool_->buffer(offload::PinnedRole::kFrozenStaging, at::kByte, h));
    auto* base = reinterpret_cast<std::byte*>(disk->buffers_.back().data_ptr());
    for (size_t c = 0; c < disk->chunks_per_half_; ++c) spans.emplace_back(base + c * disk->chunk_bytes_, disk->chunk_bytes_);
  }
  // Not registered as io_uring fixed buffers: a 14B model's halves are ~100 spans of 32 MiB, past
  // the IoEngine's 64 fixed-buffer slots.
  nvme::IoConfig io = placement.io;
  io.register_buffers = false;
  TZ_ASSIGN_OR_RETURN(disk->staging_, offload::RecordStaging::create(spans, {.paths = placement.nvme_paths,
                                                                           .io = io,
                                                                           .rank = placement.rank,
                                                                           .records = records,
                                                                           .record_bytes = disk->chunk_bytes_,
                                                                           .role = kFrozenSwap,
                                                                           .first_named = 0}));
  // Each unit filled into one half while the other's writes are in flight.
  for (size_t u = 0; u < units.size(); ++u) {
    const size_t h = u % 2;
    if (u >= 2) TZ_RETURN_IF_ERROR(disk->wait_chunks(h, u - 2, /*reads=*/false));
    for (size_t i = 0; i < units[u].size(); ++i) {
      at::Tensor view = view_in(disk->buffers_[h], disk->offsets_[u][i], units[u][i], dtype);
      TZ_RETURN_IF_ERROR(read(units[u][i], view));
    }
    disk->for_each_chunk(h, u, [&](size_t span, int64_t record, uint64_t bytes) {
      disk->staging_->write(span, record, bytes);
    });
  }
  for (size_t u = units.size() >= 2 ? units.size() - 2 : 0; u < units.size(); ++u)
    TZ_RETURN_IF_ERROR(disk->wait_chunks(u % 2, u, /*reads=*/false));
  return disk;
}

void FrozenDisk::for_each_chunk(size_t h, size_t u,
                                const std::function<void(size_t span, int64_t record, uint64_t bytes)>& f) const {
  for (uint64_t begin = 0, c = 0; begin < unit_bytes_[u]; begin += chunk_bytes_, ++c)
    f(h * chunks_per_half_ + c, first_record_[u] + static_cast<int64_t>(c), std::min(chunk_bytes_, unit_bytes_[u] - begin));
}

Status FrozenDisk::wait_chunks(size_t h, size_t u, bool reads) {
  Status first;
  for_each_chunk(h, u, [&](size_t span, int64_t, uint64_t) {
    const Status status = reads ? staging_->wait_read(span) : staging_->wait_write(span);
    if (first.ok() && !status.ok()) first = status;
  });
  return first;
}

FrozenDisk::~FrozenDisk() = default;  // the staging waits for what is in flight and removes the files

size_t FrozenDisk::slot_for(size_t u) const {
  for (size_t b = 0; b < 2; ++b)
    if (slots_[b].unit == static_cast<int64_t>(u)) return b;
  return slots_[0].reading ? 1 : 0;  // not over the read ahead, which may still be in flight
}

void FrozenDisk::start_read(size_t b, size_t u) {
  if (slots_[b].reading) finish_read(b);  // a read queued ahead that was not used: let it land first
  for_each_chunk(b, u, [&](size_t span, int64_t record, uint64_t bytes) { staging_->read(span, record, 0, bytes); });
  slots_[b] = {.unit = static_cast<int64_t>(u), .reading = true};
  read_bytes_ += unit_bytes_[u];
}

uint64_t FrozenDisk::take_read_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(read_bytes_, 0);
}

void FrozenDisk::finish_read(size_t b) {
  slots_[b].reading = false;
  const Status status = wait_chunks(b, static_cast<size_t>(slots_[b].unit), /*reads=*/true);
  if (!status.ok()) {
    slots_[b].unit = -1;
    throw Error(status);
  }
}

std::vector<at::Tensor> FrozenDisk::unit(size_t u, at::Device device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (u >= units_.size())
    throw Error(invalid_argument(fmt::format("frozen base: unit {} of {}", u, units_.size())));
  if (on_device_ && on_device_->first == u && !on_device_->second.empty() &&
      on_device_->second.front().device() == device)
    return on_device_->second;
  const size_t b = slot_for(u);
  if (slots_[b].unit != static_cast<int64_t>(u)) start_read(b, u);
  if (slots_[b].reading) finish_read(b);
  // The whole record in one copy the staging's next read cannot touch (synchronous: the buffer is
  // reused), its parameters views into it.
  const at::Tensor staged = buffers_[b].narrow(0, 0, static_cast<int64_t>(unit_bytes_[u]));
  const at::Tensor record = device.is_cpu() ? staged.clone() : staged.to(device, /*non_blocking=*/false);
  std::vector<at::Tensor> out;
  out.reserve(units_[u].size());
  for (size_t i = 0; i < units_[u].size(); ++i) out.push_back(view_in(record, offsets_[u][i], units_[u][i], dtype_));
  on_device_.emplace(u, out);
  const size_t next = next_unit(u, last_ < 0 || static_cast<int64_t>(u) > last_, units_.size());
  last_ = static_cast<int64_t>(u);
  if (next != u && slots_[1 - b].unit != static_cast<int64_t>(next)) start_read(1 - b, next);  // read ahead
  return out;
}

}  // namespace tierzero::engine
