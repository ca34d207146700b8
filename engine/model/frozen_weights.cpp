// FrozenWeights (internal/frozen_weights.h): the base weights of a LoRA run, read once from their
// source and kept on the device or in host memory.
#include "engine/model/internal/frozen_weights.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <span>

#include "engine/layout/layout.h"

namespace tierzero::engine {
namespace {

// fp32 elements read from the source at a time: bounds the staging buffer.
constexpr int64_t kPieceElements = 4 << 20;

// Reads parameter `spec` from `source` into `out` (its shape, any dtype and device) piece by piece.
Status read_into(ParamSource& source, const ParamSpec& spec, at::Tensor& out) {
  const std::optional<std::vector<int64_t>> shape = source.shape(spec.name);
  if (!shape) return not_found(fmt::format("the base weights have no tensor {}", spec.name));
  if (*shape != spec.shape)
    return invalid_argument(fmt::format("base weight {} has shape [{}], the model expects [{}]", spec.name,
                                        fmt::join(*shape, ","), fmt::join(spec.shape, ",")));
  at::Tensor flat = out.view({-1});
  const int64_t numel = flat.numel();
  at::Tensor staging = at::empty({std::min(numel, kPieceElements)}, at::kFloat);
  for (int64_t first = 0; first < numel; first += kPieceElements) {
    const int64_t count = std::min(kPieceElements, numel - first);
    TZ_RETURN_IF_ERROR(
        source.read(spec.name, first, std::span<float>(staging.data_ptr<float>(), static_cast<size_t>(count))));
    flat.narrow(0, first, count).copy_(staging.narrow(0, 0, count));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<FrozenWeights>> FrozenWeights::load(const FunctionalModel& model, ParamSource& source,
                                                           at::ScalarType dtype, at::Device device,
                                                           const FrozenPlacement& placement) {
  const FrozenHome home = placement.home;
  std::unique_ptr<FrozenWeights> frozen(new FrozenWeights(home));
  if (home == FrozenHome::kNvme) {
    std::vector<std::vector<ParamSpec>> units(model.num_units());
    for (size_t u = 0; u < units.size(); ++u) units[u] = model.unit_params(u);
    TZ_ASSIGN_OR_RETURN(frozen->disk_,
                        FrozenDisk::create(
                            units, dtype, placement,
                            [&source](const ParamSpec& spec, at::Tensor& out) { return read_into(source, spec, out); },
                            state_layout::kFrozenMaxRecordBytes, device));
    frozen->bytes_ = frozen->disk_->bytes();
    return frozen;
  }
  const std::vector<ParamSpec> params = all_params(model);
  if (home == FrozenHome::kPinnedHost) {  // the weights' buffers as engine/layout lists them
    std::vector<int64_t> numels;
    for (const ParamSpec& spec : params) numels.push_back(c10::multiply_integers(spec.shape));
    try {
      frozen->pool_ = offload::HostTier::create(
          state_layout::frozen_pinned_buffers(numels, static_cast<int>(at::elementSize(dtype))),
          placement.pinned_limit_bytes, device, placement.rank);
    } catch (const Error& e) {
      return e.status().with_context("the LoRA base weights pinned (offload_param.pin_memory)");
    }
  }
  at::TensorOptions options = at::TensorOptions().dtype(dtype);
  if (home == FrozenHome::kDevice) options = options.device(device);
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSpec& spec = params[i];
    at::Tensor weight = frozen->pool_ != nullptr
                            ? frozen->pool_->buffer(offload::PinnedRole::kFrozenWeight, dtype, static_cast<int>(i))
                                  .view(spec.shape)
                            : at::empty(spec.shape, options);
    TZ_RETURN_IF_ERROR(read_into(source, spec, weight));
    frozen->bytes_ += static_cast<int64_t>(weight.nbytes());
    frozen->by_name_.emplace(spec.name, std::move(weight));
  }
  frozen->units_.resize(model.num_units());
  for (size_t u = 0; u < model.num_units(); ++u) {
    for (const ParamSpec& spec : model.unit_params(u)) frozen->units_[u].push_back(&frozen->by_name_.at(spec.name));
  }
  if (home != FrozenHome::kDevice && device.is_cuda())
    frozen->prefetch_ = std::make_unique<FrozenPrefetch>(frozen->units_, device);
  return frozen;
}

FrozenWeights::~FrozenWeights() = default;

std::string FrozenWeights::where() const {
  switch (home_) {
    case FrozenHome::kDevice: return "on the device";
    case FrozenHome::kPinnedHost:
      return pool_->pinned_bytes() > 0 ? "in pinned host memory" : "in host memory (no GPU to pin for)";
    case FrozenHome::kPageableHost: return "in pageable host memory";
    case FrozenHome::kNvme: return "on NVMe (" + disk_->describe() + ")";
  }
  return "";
}

const offload::HostTier* FrozenWeights::pool() const { return disk_ != nullptr ? &disk_->staging_pool() : pool_.get(); }

int64_t FrozenWeights::pinned_bytes() const { return pool() != nullptr ? pool()->pinned_bytes() : 0; }

int64_t FrozenWeights::pool_bytes() const { return pool() != nullptr ? pool()->bytes() : 0; }

int64_t FrozenWeights::nvme_bytes() const { return disk_ != nullptr ? static_cast<int64_t>(disk_->file_bytes()) : 0; }

uint64_t FrozenWeights::take_nvme_read_bytes() const { return disk_ != nullptr ? disk_->take_read_bytes() : 0; }

std::vector<at::Tensor> FrozenWeights::unit(size_t u, at::Device device) const {
  if (disk_ != nullptr) return disk_->unit(u, device);
  if (prefetch_ != nullptr && device == prefetch_->device()) return prefetch_->unit(u);
  // No copy here: a CUDA run's host-resident weights come through the prefetcher (DeviceCopies).
  std::vector<at::Tensor> out;
  out.reserve(units_.at(u).size());
  for (const at::Tensor* weight : units_[u]) {
    if (weight->device() != device)
      throw Error(internal_error(fmt::format("the LoRA base weights of unit {} live on {} ({}), asked for on {}", u,
                                             weight->device().str(), where(), device.str())));
    out.push_back(*weight);
  }
  return out;
}

}  // namespace tierzero::engine
