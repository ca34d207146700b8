// DecodingModel (internal/decoding_model.h): the model's units run over new positions with a KV
// cache per decoder layer (FunctionalModel::forward_unit_cached), LoRA through LoraModel.
#include "engine/generate/internal/decoding_model.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <map>
#include <utility>

namespace tierzero::engine {
namespace {

// Unit u's parameters of `model` by name from `tensors`, in unit_params(u) order, cast to `dtype`
// on `device`; kInvalidArgument naming a missing one (`origin`: where they were read from).
Result<std::vector<std::vector<at::Tensor>>> params_by_unit(const FunctionalModel& model,
                                                            const std::map<std::string, at::Tensor>& tensors,
                                                            at::ScalarType dtype, at::Device device,
                                                            const std::string& origin) {
  std::vector<std::vector<at::Tensor>> units(model.num_units());
  for (size_t u = 0; u < model.num_units(); ++u) {
    for (const ParamSpec& spec : model.unit_params(u)) {
      auto it = tensors.find(spec.name);
      if (it == tensors.end()) return invalid_argument(fmt::format("{}: no tensor {}", origin, spec.name));
      units[u].push_back(it->second.to(device, dtype));
    }
  }
  return units;
}

}  // namespace

Result<std::unique_ptr<DecodingModel>> DecodingModel::load(const std::string& model_dir, const std::string& adapter_dir,
                                                           at::ScalarType dtype, at::Device device) {
  TZ_ASSIGN_OR_RETURN(const ModelConfig config, load_model_config(model_dir));
  std::unique_ptr<FunctionalModel> base = make_causal_lm(config);
  if (adapter_dir.empty()) {
    TZ_ASSIGN_OR_RETURN(const auto weights, load_hf_weights(model_dir, dtype, device));
    TZ_RETURN_IF_ERROR(check_params(*base, weights));
    TZ_ASSIGN_OR_RETURN(auto units, params_by_unit(*base, weights, dtype, device, model_dir));
    return std::unique_ptr<DecodingModel>(new DecodingModel(std::move(base), std::move(units), device));
  }
  TZ_ASSIGN_OR_RETURN(const LoraSpec spec, read_adapter_spec(adapter_dir));
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<ParamSource> base_weights, open_safetensors_params(model_dir));
  TZ_RETURN_IF_ERROR(check_params(*base, *base_weights));
  auto lora =
      LoraModel::create(std::move(base), spec, *base_weights, dtype, device, FrozenPlacement(FrozenHome::kDevice));
  if (!lora.ok()) return Status(lora.status().code(), "--adapter " + adapter_dir + ": " + lora.status().message());
  auto adapters = load_peft_adapter(adapter_dir, **lora);
  if (!adapters.ok())
    return Status(adapters.status().code(), fmt::format("--adapter {} does not fit the model {}: {}", adapter_dir,
                                                        model_dir, adapters.status().message()));
  TZ_ASSIGN_OR_RETURN(auto units,
                      params_by_unit(**lora, *adapters, dtype, device, adapter_dir + "/adapter_model.safetensors"));
  return std::unique_ptr<DecodingModel>(new DecodingModel(std::move(*lora), std::move(units), device));
}

DecodingModel::DecodingModel(std::unique_ptr<FunctionalModel> model, std::vector<std::vector<at::Tensor>> unit_params,
                             at::Device device)
    : model_(std::move(model)),
      unit_params_(std::move(unit_params)),
      caches_(model_->num_units() - 2),
      device_(device) {}

at::Tensor DecodingModel::next_logits(const std::vector<int64_t>& sequence) {
  at::NoGradGuard no_grad;
  const RopeScaling& rope = config().rope_scaling;
  const auto total = static_cast<int64_t>(sequence.size());
  if (rope.type == "longrope" && total > rope.original_max_position_embeddings &&
      length() <= rope.original_max_position_embeddings)
    caches_.assign(caches_.size(), LayerKvCache{});
  const std::vector<int64_t> tokens(sequence.begin() + length(), sequence.end());
  const size_t head = model_->num_units() - 1;
  LayerKvCache unused;  // the embedding and the head keep no cache
  at::Tensor x = at::tensor(tokens, at::TensorOptions().dtype(at::kLong)).to(device_).unsqueeze(0);
  x = model_->forward_unit_cached(0, x, unit_params_[0], Projector{}, unused);
  for (size_t u = 1; u < head; ++u) x = model_->forward_unit_cached(u, x, unit_params_[u], Projector{}, caches_[u - 1]);
  // Only the last position's logits, as generate() asks for (logits_to_keep=1).
  x = x.narrow(1, x.size(1) - 1, 1);
  return model_->forward_unit_cached(head, x, unit_params_[head], Projector{}, unused).reshape({-1});
}

}  // namespace tierzero::engine
