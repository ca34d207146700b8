// A LoRA run's parts of the session (tierzero.lora): the model becomes a LoraModel over the frozen
// base and the engine trains its adapters; saves write a PEFT adapter directory beside the engine
// checkpoint; --export writes the merged model.
//
// Checkpoints hold the adapters and their optimizer state only (the engine's parameters): the frozen
// base is never changed, so it is read again from --model (or redrawn from the seed) on resume
// instead of being copied into every checkpoint.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include "checkpoint/convert/consolidate.h"
#include "engine/layout/layout.h"
#include "engine/model/functional_model.h"
#include "engine/train/internal/lora_export.h"
#include "engine/train/internal/session.h"

namespace tierzero::engine::trainer {
namespace {

// Where the frozen base lives: offload_param's device (pinned when offload_param.pin_memory; on NVMe
// in swap files under its nvme_path, over the "aio" block), else the compute device.
FrozenPlacement frozen_placement(const DsConfig& config, int rank) {
  const OffloadParamConfig& offload = config.zero.offload_param;
  switch (offload.device) {
    case OffloadDevice::kNone: return FrozenHome::kDevice;
    case OffloadDevice::kCpu: {
      if (!offload.pin_memory) return FrozenHome::kPageableHost;
      FrozenPlacement pinned(FrozenHome::kPinnedHost);
      pinned.rank = rank;
      pinned.pinned_limit_bytes = config.tierzero.pinned_memory_limit;
      return pinned;
    }
    case OffloadDevice::kNvme: break;
  }
  FrozenPlacement placement(FrozenHome::kNvme);
  placement.nvme_paths = offload.nvme_paths;
  placement.io = config.aio;
  placement.rank = rank;
  placement.pinned_limit_bytes = config.tierzero.pinned_memory_limit;
  return placement;
}

LoraSpec lora_spec(const LoraConfig& c) {
  return LoraSpec{.r = c.r,
                  .lora_alpha = c.lora_alpha,
                  .use_rslora = c.use_rslora,
                  .target_modules = c.target_modules,
                  .target_pattern = c.target_pattern,
                  .dropout = c.lora_dropout};
}

}  // namespace

Status TrainingSession::adapt_model() {
  const LoraConfig& config = *config_.config.tierzero.lora;
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<LoraModel> lora,
                      LoraModel::create(std::move(network_), lora_spec(config), *model_.weights,
                                        options_.partition.compute_dtype, device_,
                                        frozen_placement(config_.config, comm_->rank())));
  if (config.init_adapter.empty()) {
    initial_adapters_ = init_lora_adapters(*lora, args_.init_seed);
  } else {
    TZ_ASSIGN_OR_RETURN(initial_adapters_, load_peft_adapter(resolve_path(config.init_adapter), *lora));
  }
  lora_ = lora.get();
  // The base's pinned pool takes its share of tierzero.pinned_memory_limit; the engine's pool the rest.
  options_.pinned_memory_limit_bytes =
      state_layout::pool_limit_after(options_.pinned_memory_limit_bytes, static_cast<uint64_t>(lora->frozen_pool_bytes()));
  network_ = std::move(lora);
  model_.weights = map_param_source(initial_adapters_);  // the engine's parameters: the adapters
  return {};
}

std::string TrainingSession::lora_summary() const {
  int64_t trainable = 0;
  for (const ParamSpec& spec : all_params(*lora_)) {
    int64_t numel = 1;
    for (int64_t d : spec.shape) numel *= d;
    trainable += numel;
  }
  const LoraSpec& spec = lora_->spec();
  return "LoRA r " + std::to_string(spec.r) + ", lora_alpha " + fmt::format("{:g}", spec.lora_alpha) + " (scaling " +
         fmt::format("{:.4g}", spec.scaling()) + ")" +
         (spec.dropout > 0.0 ? fmt::format(", dropout {:g} (drawn from --seed {})", spec.dropout, args_.init_seed) : "") +
         ": " + std::to_string(lora_->targets().size()) + " projections adapted, " +
         std::to_string(trainable) + " trainable parameters; frozen base " + format_bytes(static_cast<uint64_t>(lora_->frozen_bytes())) +
         " " + lora_->frozen_where() + " (no gradients, no optimizer state)";
}

Status TrainingSession::save_lora_adapter(const std::string& dir) {
  const std::map<std::string, at::Tensor> adapters = engine_->master_params();  // a collective
  const Status status = printer() ? save_peft_adapter(dir, *lora_, adapters, model_.description) : Status();
  return agree_across_ranks(*comm_, status, "saving the LoRA adapter in " + dir);
}

Status TrainingSession::export_lora_model() {
  const std::map<std::string, at::Tensor> adapters = engine_->master_params();  // a collective
  Status status;
  if (printer()) {
    ModelAndWeights base;
    Result<ModelAndWeights> loaded = load_model(args_);
    status = loaded.status();
    if (status.ok()) {
      base = std::move(*loaded);
      init_random_weights(args_, base);
      const std::unique_ptr<checkpoint::ConsolidationSource> source =
          merged_lora_source(*lora_, *base.weights, adapters, model_.config_json);
      checkpoint::ConvertOptions convert;
      const at::ScalarType dtype = options_.partition.compute_dtype;
      convert.dtype = dtype == at::kBFloat16 ? ElementType::kBF16
                      : dtype == at::kHalf   ? ElementType::kF16
                                             : ElementType::kF32;
      convert.progress = false;
      convert.companion_dirs = {args_.model_dir};
      status = checkpoint::consolidate_to_safetensors(*source, args_.export_dir, convert).status();
    }
  }
  return agree_across_ranks(*comm_, status, "exporting the merged LoRA model to " + args_.export_dir);
}

}  // namespace tierzero::engine::trainer
