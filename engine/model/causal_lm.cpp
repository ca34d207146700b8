// The decoder-only causal LM as a chain of pure unit functions (see functional_model.h): the
// embedding, the family's decoder layers (llama_layer.cpp, phi3_layer.cpp, gemma_layer.cpp) and the
// final norm + LM head. Each op mirrors transformers' modeling code (same dtype casts in the same
// places): the parity tests find fp32 logits equal to transformers' and bf16 within its own
// bf16-vs-fp32 spread.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <optional>
#include <set>

#include "engine/model/functional_model.h"
#include "engine/model/internal/layer_ops.h"

namespace tierzero::engine {
namespace {

class CausalLm final : public FunctionalModel {
 public:
  explicit CausalLm(ModelConfig config) : config_(std::move(config)) {
    const int64_t h = config_.hidden_size, v = config_.vocab_size;
    units_.push_back({{"model.embed_tokens.weight", {v, h}}});
    for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
      units_.push_back(config_.is_gemma()             ? gemma_layer_params(config_, layer)
                       : config_.fused_projections() ? phi3_layer_params(config_, layer)
                                                     : llama_layer_params(config_, layer));
    }
    const char* head = config_.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight";
    units_.push_back({{"model.norm.weight", {h}}, {head, {v, h}}});
  }

  size_t num_units() const override { return units_.size(); }
  const std::vector<ParamSpec>& unit_params(size_t u) const override { return units_.at(u); }
  const ModelConfig& config() const override { return config_; }

  at::Tensor forward_unit_with(size_t u, const at::Tensor& input, at::TensorList params,
                               const Projector& projector) const override {
    check_unit_inputs(u, input, params);
    if (u == 0) return embed(input, params[0]);
    if (u + 1 == units_.size()) return lm_head(input, params, projector);
    return decoder_layer(u, input, params, projector, nullptr);
  }

  at::Tensor forward_unit_cached(size_t u, const at::Tensor& input, at::TensorList params, const Projector& projector,
                                 LayerKvCache& cache) const override {
    if (u == 0 || u + 1 == units_.size()) return forward_unit_with(u, input, params, projector);
    check_unit_inputs(u, input, params);
    return decoder_layer(u, input, params, projector, &cache);
  }

 private:
  void check_unit_inputs(size_t u, const at::Tensor& input, at::TensorList params) const {
    if (u >= units_.size()) {
      throw Error(
          invalid_argument(fmt::format("forward_unit: unit {} out of range (the model has {})", u, units_.size())));
    }
    const std::vector<ParamSpec>& specs = units_[u];
    if (params.size() != specs.size()) {
      throw Error(invalid_argument(
          fmt::format("forward_unit: unit {} takes {} parameters, got {}", u, specs.size(), params.size())));
    }
    for (size_t i = 0; i < specs.size(); ++i) {
      if (!params[i].defined() || params[i].sizes() != at::IntArrayRef(specs[i].shape)) {
        throw Error(invalid_argument(
            fmt::format("forward_unit: parameter {} has shape [{}], expected [{}]", specs[i].name,
                        params[i].defined() ? fmt::format("{}", fmt::join(params[i].sizes(), ",")) : "undefined",
                        fmt::join(specs[i].shape, ","))));
      }
    }
    const int64_t expected_rank = u == 0 ? 2 : 3;
    if (input.dim() != expected_rank || (u > 0 && input.size(-1) != config_.hidden_size)) {
      throw Error(invalid_argument(fmt::format("forward_unit: unit {} input has shape [{}]; expected {}", u,
                                               fmt::join(input.sizes(), ","),
                                               u == 0 ? "token ids [B,T]" : "hidden states [B,T,hidden_size]")));
    }
  }

  // Decoder layer unit u (1..L) of the config's family.
  at::Tensor decoder_layer(size_t u, const at::Tensor& input, at::TensorList params, const Projector& projector,
                           LayerKvCache* cache) const {
    const int64_t layer = static_cast<int64_t>(u) - 1;
    if (config_.is_gemma()) return gemma_layer(config_, layer, input, params, projector, cache);
    if (config_.fused_projections()) return phi3_layer(config_, layer, input, params, projector, cache);
    return llama_layer(config_, layer, input, params, projector, cache);
  }

  // nn.Embedding(vocab, hidden, padding_idx=pad_token_id): the pad row gets no gradient. Gemma
  // multiplies by sqrt(hidden_size), a fp32 scalar cast to the weight's dtype (as its
  // ScaledWordEmbedding's embed_scale buffer).
  at::Tensor embed(const at::Tensor& tokens, const at::Tensor& weight) const {
    at::Tensor h = at::embedding(weight, tokens, /*padding_idx=*/config_.pad_token_id.value_or(-1));
    if (!config_.is_gemma()) return h;
    const at::Tensor scale =
        at::scalar_tensor(std::sqrt(static_cast<double>(config_.hidden_size)), at::TensorOptions().dtype(at::kFloat));
    return h * scale.to(weight.options());
  }

  // Final norm and LM head (Gemma: its norm, then final_logit_softcapping in the model's dtype);
  // logits widened to fp32 as HF's loss does (double stays double).
  at::Tensor lm_head(const at::Tensor& x, at::TensorList params, const Projector& projector) const {
    const double eps = config_.rms_norm_eps;
    at::Tensor h = config_.is_gemma() ? gemma_rms_norm(x, params[0], eps) : rms_norm(x, params[0], eps);
    at::Tensor logits = projector.project(1, h, params[1], std::nullopt);
    if (const std::optional<double>& cap = config_.final_logit_softcapping) logits = at::tanh(logits / *cap) * *cap;
    return logits.to(at::promote_types(logits.scalar_type(), at::kFloat));
  }

  ModelConfig config_;
  std::vector<std::vector<ParamSpec>> units_;
};

}  // namespace

at::Tensor Projector::project(size_t /*weight_index*/, const at::Tensor& x, const at::Tensor& weight,
                              const std::optional<at::Tensor>& bias) const {
  return at::linear(x, weight, bias);
}

at::Tensor FunctionalModel::forward_unit(size_t u, const at::Tensor& input, at::TensorList params) const {
  return forward_unit_with(u, input, params, Projector{});
}

at::Tensor FunctionalModel::forward_unit_cached(size_t /*u*/, const at::Tensor& /*input*/, at::TensorList /*params*/,
                                                const Projector& /*projector*/, LayerKvCache& /*cache*/) const {
  throw Error(unsupported("forward_unit_cached: this model has no incremental (KV-cached) forward"));
}

std::unique_ptr<FunctionalModel> make_causal_lm(const ModelConfig& config) {
  throw_if_error(validate_model_config(config));
  return std::make_unique<CausalLm>(config);
}

std::vector<ParamSpec> all_params(const FunctionalModel& model) {
  std::vector<ParamSpec> out;
  std::set<std::string> seen;
  for (size_t u = 0; u < model.num_units(); ++u) {
    for (const ParamSpec& spec : model.unit_params(u)) {
      if (seen.insert(spec.name).second) out.push_back(spec);
    }
  }
  return out;
}

Status check_params(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params) {
  return check_params(model, *map_param_source(params));
}

at::Tensor forward_full(const FunctionalModel& model, const at::Tensor& tokens,
                        const std::map<std::string, at::Tensor>& params) {
  at::Tensor x = tokens;
  for (size_t u = 0; u < model.num_units(); ++u) {
    std::vector<at::Tensor> unit;
    for (const ParamSpec& spec : model.unit_params(u)) {
      auto it = params.find(spec.name);
      if (it == params.end()) throw Error(not_found(fmt::format("forward_full: parameter {} is missing", spec.name)));
      unit.push_back(it->second);
    }
    x = model.forward_unit(u, x, unit);
  }
  return x;
}

at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels) {
  constexpr int64_t kIgnore = -100;
  at::Tensor shifted = at::constant_pad_nd(labels, {0, 1}, kIgnore).narrow(-1, 1, labels.size(-1));
  at::Tensor flat_logits =
      logits.to(at::promote_types(logits.scalar_type(), at::kFloat)).reshape({-1, logits.size(-1)});
  return at::cross_entropy_loss(flat_logits, shifted.reshape({-1}).to(logits.device()), /*weight=*/{},
                                at::Reduction::Mean, kIgnore);
}

}  // namespace tierzero::engine
