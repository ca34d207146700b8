// FrozenDisk (internal/frozen_disk.h): a LoRA run's frozen base in swap files on NVMe, a unit per
// record, read back through two pinned staging buffers.
#include "engine/model/internal/frozen_disk.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <c10/util/accumulate.h>
#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <utility>

#include "engine/model/internal/unit_order.h"

namespace tierzero::engine {
namespace {

constexpr uint64_t kTensorAlignment = 64;  // each parameter's offset in its record

uint64_t round_up(uint64_t bytes, uint64_t to) { return (bytes + to - 1) / to * to; }

// Parameter `spec`'s view into `record` (bytes, on any device) at `offset`.
at::Tensor view_in(const at::Tensor& record, uint64_t offset, const ParamSpec& spec, at::ScalarType dtype) {
  const auto bytes = static_cast<int64_t>(c10::multiply_integers(spec.shape) * at::elementSize(dtype));
  return record.narrow(0, static_cast<int64_t>(offset), bytes).view(dtype).view(spec.shape);
}

}  // namespace

Result<std::unique_ptr<FrozenDisk>> FrozenDisk::create(const std::vector<std::vector<ParamSpec>>& units,
                                                       at::ScalarType dtype, const FrozenPlacement& placement,
                                                       const ReadParam& read) {
  std::unique_ptr<FrozenDisk> disk(new FrozenDisk());
  disk->units_ = units;
  disk->dtype_ = dtype;
  const uint64_t element = at::elementSize(dtype);
  for (const std::vector<ParamSpec>& unit : units) {
    std::vector<uint64_t> offsets;
    uint64_t used = 0;
    for (const ParamSpec& spec : unit) {
      offsets.push_back(used);
      const uint64_t bytes = c10::multiply_integers(spec.shape) * element;
      disk->bytes_ += static_cast<int64_t>(bytes);
      used = round_up(used + bytes, kTensorAlignment);
    }
    disk->offsets_.push_back(std::move(offsets));
    disk->record_used_.push_back(round_up(std::max<uint64_t>(used, 1), offload::SwapFiles::kRecordAlignment));
    disk->record_bytes_ = std::max(disk->record_bytes_, disk->record_used_.back());
  }
  const at::TensorOptions bytes_options = at::TensorOptions().dtype(at::kByte).pinned_memory(at::hasCUDA());
  std::vector<std::span<std::byte>> spans;
  for (int b = 0; b < 2; ++b) {
    disk->buffers_.push_back(at::empty({static_cast<int64_t>(disk->record_bytes_)}, bytes_options));
    spans.emplace_back(reinterpret_cast<std::byte*>(disk->buffers_.back().data_ptr()), disk->record_bytes_);
  }
  TZ_ASSIGN_OR_RETURN(disk->staging_, offload::RecordStaging::create(
                                          spans, {.paths = placement.nvme_paths,
                                                  .io = placement.io,
                                                  .rank = placement.rank,
                                                  .records = static_cast<int64_t>(units.size()),
                                                  .record_bytes = disk->record_bytes_,
                                                  .role = kFrozenSwap,
                                                  .first_named = 0}));
  // Each unit filled into one buffer while the other's write is in flight.
  for (size_t u = 0; u < units.size(); ++u) {
    const size_t b = u % 2;
    TZ_RETURN_IF_ERROR(disk->staging_->wait_write(b));
    for (size_t i = 0; i < units[u].size(); ++i) {
      at::Tensor view = view_in(disk->buffers_[b], disk->offsets_[u][i], units[u][i], dtype);
      TZ_RETURN_IF_ERROR(read(units[u][i], view));
    }
    disk->staging_->write(b, static_cast<int64_t>(u), disk->record_used_[u]);
  }
  for (size_t b = 0; b < 2; ++b) TZ_RETURN_IF_ERROR(disk->staging_->wait_write(b));
  return disk;
}

FrozenDisk::~FrozenDisk() = default;  // the staging waits for what is in flight and removes the files

size_t FrozenDisk::slot_for(size_t u) const {
  for (size_t b = 0; b < 2; ++b)
    if (slots_[b].unit == static_cast<int64_t>(u)) return b;
  return slots_[0].reading ? 1 : 0;  // not over the read ahead, which may still be in flight
}

void FrozenDisk::start_read(size_t b, size_t u) {
  if (slots_[b].reading) finish_read(b);  // a read queued ahead that was not used: let it land first
  staging_->read(b, static_cast<int64_t>(u), 0, record_used_[u]);
  slots_[b] = {.unit = static_cast<int64_t>(u), .reading = true};
  read_bytes_ += record_used_[u];
}

uint64_t FrozenDisk::take_read_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(read_bytes_, 0);
}

void FrozenDisk::finish_read(size_t b) {
  slots_[b].reading = false;
  const Status status = staging_->wait_read(b);
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
  const at::Tensor staged = buffers_[b].narrow(0, 0, static_cast<int64_t>(record_used_[u]));
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
