// FrozenDisk (internal/frozen_disk.h): a LoRA run's frozen base on NVMe, each unit a record of
// offload/'s RecordCache over two pinned staging halves, copied to the device through DeviceCopies.
#include "engine/model/internal/frozen_disk.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <fmt/format.h>

#include <span>
#include <utility>

#include "engine/layout/layout.h"
#include "engine/model/internal/unit_order.h"

namespace tierzero::engine {
namespace {

using Access = offload::RecordCache::Access;
using Release = offload::RecordCache::Release;

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
  std::unique_ptr<FrozenDisk> disk(new FrozenDisk(device));
  disk->units_ = units;
  disk->dtype_ = dtype;
  const auto element = static_cast<int>(at::elementSize(dtype));
  std::vector<std::vector<int64_t>> numels;
  for (const std::vector<ParamSpec>& unit : units) {
    numels.emplace_back();
    for (const ParamSpec& spec : unit) numels.back().push_back(c10::multiply_integers(spec.shape));
    for (int64_t n : numels.back()) disk->bytes_ += n * element;
  }
  // The records and the staging halves as engine/layout sizes them (the planner too); the halves
  // from a pool of their own (pinned for `device`, under placement.pinned_limit_bytes).
  state_layout::FrozenDiskLayout layout = state_layout::frozen_disk_layout(numels, element, max_record_bytes);
  disk->offsets_ = std::move(layout.offsets);
  try {
    disk->pool_ = offload::HostTier::create(state_layout::frozen_staging_buffers(layout), placement.pinned_limit_bytes,
                                            device, placement.rank);
    disk->copies_ = offload::DeviceCopies::create(device, /*timing=*/false);
  } catch (const Error& e) {
    return e.status().with_context("the LoRA base's NVMe staging (offload_param \"nvme\")");
  }
  std::vector<std::span<std::byte>> halves;
  for (int h = 0; h < 2; ++h)
    halves.push_back(offload::bytes_of(disk->pool_->buffer(offload::PinnedRole::kFrozenStaging, at::kByte, h)));
  TZ_ASSIGN_OR_RETURN(disk->cache_, offload::RecordCache::create(halves, {},
                                                                 {.files = {.paths = placement.nvme_paths,
                                                                            .io = placement.io,
                                                                            .rank = placement.rank,
                                                                            .role = offload::kFrozenSwap},
                                                                  .record_bytes = std::move(layout.unit_bytes),
                                                                  .memory_records = 0,
                                                                  .read_ahead = false,
                                                                  .write_behind = true,
                                                                  .file_record_bytes = layout.chunk_bytes}));
  // Each unit filled into its half (unit u: half u % 2) while the other half's writes are in flight.
  for (size_t u = 0; u < units.size(); ++u) {
    const auto record = static_cast<int64_t>(u);
    TZ_ASSIGN_OR_RETURN(std::span<std::byte> bytes, disk->cache_->acquire(record, Access::kOverwrite));
    const at::Tensor staged = offload::byte_tensor(bytes);
    for (size_t i = 0; i < units[u].size(); ++i) {
      at::Tensor view = view_in(staged, disk->offsets_[u][i], units[u][i], dtype);
      TZ_RETURN_IF_ERROR(read(units[u][i], view));
    }
    TZ_RETURN_IF_ERROR(disk->cache_->release(record, Release::kWrite));
  }
  TZ_RETURN_IF_ERROR(disk->cache_->wait_writes());
  return disk;
}

FrozenDisk::~FrozenDisk() = default;  // the cache waits for the copies and transfers, removes the files

uint64_t FrozenDisk::take_read_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t read = cache_->read_bytes();
  return read - std::exchange(read_taken_, read);
}

std::vector<at::Tensor> FrozenDisk::unit(size_t u, at::Device device) {
  std::lock_guard<std::mutex> lock(mu_);
  if (u >= units_.size() || device != device_)
    throw Error(invalid_argument(
        fmt::format("frozen base: unit {} of {} on {} (staged for {})", u, units_.size(), device.str(), device_.str())));
  if (!on_device_ || on_device_->unit != u) {
    // The whole record in one copy, its parameters views into it; the half is not read into again
    // before the copy has run.
    const auto record = static_cast<int64_t>(u);
    const at::Tensor staged = offload::byte_tensor(value_or_throw(cache_->acquire(record, Access::kRead)));
    offload::DeviceUpload upload = copies_->upload({&staged});
    const std::shared_ptr<offload::CopyDone> done = std::move(upload.done);
    throw_if_error(cache_->release(record, Release::kClean, done));
    std::vector<at::Tensor> weights;
    for (size_t i = 0; i < units_[u].size(); ++i)
      weights.push_back(view_in(upload.tensors.front(), offsets_[u][i], units_[u][i], dtype_));
    on_device_ = OnDevice{.unit = u, .weights = std::move(weights), .done = done};
    const size_t next = next_unit(u, last_ < 0 || record > last_, units_.size());
    last_ = record;
    if (next != u) throw_if_error(cache_->prefetch(static_cast<int64_t>(next)));  // read ahead
  }
  on_device_->done->order_current_stream();
  return on_device_->weights;
}

}  // namespace tierzero::engine
