// The decoder-only causal LM as a chain of pure unit functions (see functional_model.h). Each op
// mirrors transformers' modeling_llama.py / modeling_qwen2.py / modeling_mistral.py (same dtype
// casts in the same places): the parity tests find fp32 and bf16 logits bit-identical on CPU.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <optional>
#include <set>

#include "engine/model/functional_model.h"
#include "engine/model/internal/rope.h"

namespace tierzero::engine {
namespace {

// LlamaRMSNorm: normalise in fp32 (double stays double), cast back, then scale by the weight.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::ScalarType compute = at::promote_types(x.scalar_type(), at::kFloat);
  at::Tensor h = x.to(compute);
  at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * at::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

// Boolean attention mask [T, T] for a sliding window: query q sees keys q-window+1 .. q.
at::Tensor sliding_window_mask(int64_t seq_len, int64_t window, at::Device device) {
  at::Tensor q = at::arange(seq_len, at::TensorOptions().dtype(at::kLong).device(device)).unsqueeze(1);
  at::Tensor k = q.transpose(0, 1);
  return (k <= q).logical_and(k > q - window);
}

// Parameter names of one decoder layer in forward order; which biases exist depends on the config.
std::vector<ParamSpec> layer_param_specs(const ModelConfig& c, int64_t layer) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  std::vector<ParamSpec> specs;
  auto linear = [&](const std::string& name, int64_t out, int64_t in, bool bias) {
    specs.push_back({p + name + ".weight", {out, in}});
    if (bias) specs.push_back({p + name + ".bias", {out}});
  };
  specs.push_back({p + "input_layernorm.weight", {h}});
  linear("self_attn.q_proj", q, h, c.qkv_bias);
  linear("self_attn.k_proj", kv, h, c.qkv_bias);
  linear("self_attn.v_proj", kv, h, c.qkv_bias);
  linear("self_attn.o_proj", h, q, c.o_proj_bias);
  specs.push_back({p + "post_attention_layernorm.weight", {h}});
  linear("mlp.gate_proj", inter, h, c.mlp_bias);
  linear("mlp.up_proj", inter, h, c.mlp_bias);
  linear("mlp.down_proj", h, inter, c.mlp_bias);
  return specs;
}

// Hands out a unit's parameters in unit_params order, with the optional biases in place.
class ParamCursor {
 public:
  explicit ParamCursor(at::TensorList params) : params_(params) {}
  const at::Tensor& next() { return params_[i_++]; }
  std::optional<at::Tensor> next_if(bool present) { return present ? std::optional<at::Tensor>(next()) : std::nullopt; }
  // Projects x through the next weight (and the bias after it when `has_bias`) with `projector`.
  at::Tensor project_next(const Projector& projector, const at::Tensor& x, bool has_bias) {
    const size_t weight_index = i_;
    const at::Tensor& weight = next();
    return projector.project(weight_index, x, weight, next_if(has_bias));
  }

 private:
  at::TensorList params_;
  size_t i_ = 0;
};

class CausalLm final : public FunctionalModel {
 public:
  explicit CausalLm(ModelConfig config) : config_(std::move(config)) {
    const int64_t h = config_.hidden_size, v = config_.vocab_size;
    units_.push_back({{"model.embed_tokens.weight", {v, h}}});
    for (int64_t layer = 0; layer < config_.num_hidden_layers; ++layer) {
      units_.push_back(layer_param_specs(config_, layer));
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
    return decoder_layer(static_cast<int64_t>(u) - 1, input, params, projector);
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

  // nn.Embedding(vocab, hidden, padding_idx=pad_token_id): the pad row gets no gradient.
  at::Tensor embed(const at::Tensor& tokens, const at::Tensor& weight) const {
    return at::embedding(weight, tokens, /*padding_idx=*/config_.pad_token_id.value_or(-1));
  }

  at::Tensor decoder_layer(int64_t layer, const at::Tensor& x, at::TensorList params,
                           const Projector& projector) const {
    const ModelConfig& c = config_;
    ParamCursor p(params);
    const int64_t batch = x.size(0), seq_len = x.size(1);

    const at::Tensor& input_norm = p.next();
    at::Tensor h = rms_norm(x, input_norm, c.rms_norm_eps);
    at::Tensor q = p.project_next(projector, h, c.qkv_bias).view({batch, seq_len, -1, c.head_dim}).transpose(1, 2);
    at::Tensor k = p.project_next(projector, h, c.qkv_bias).view({batch, seq_len, -1, c.head_dim}).transpose(1, 2);
    at::Tensor v = p.project_next(projector, h, c.qkv_bias).view({batch, seq_len, -1, c.head_dim}).transpose(1, 2);
    auto [cos, sin] = rope_cos_sin(c, seq_len, x.scalar_type(), x.device());
    q = apply_rope(q, cos, sin);
    k = apply_rope(k, cos, sin);

    std::optional<at::Tensor> mask;
    if (c.layer_uses_sliding_window(layer) && seq_len > *c.sliding_window) {
      mask = sliding_window_mask(seq_len, *c.sliding_window, x.device());
    }
    const double scale = std::pow(static_cast<double>(c.head_dim), -0.5);
    at::Tensor attn = at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0,
                                                       /*is_causal=*/!mask.has_value(), scale,
                                                       /*enable_gqa=*/c.num_key_value_heads != c.num_attention_heads);
    attn = attn.transpose(1, 2).reshape({batch, seq_len, -1});
    at::Tensor x1 = x + p.project_next(projector, attn, c.o_proj_bias);

    const at::Tensor& post_norm = p.next();
    h = rms_norm(x1, post_norm, c.rms_norm_eps);
    at::Tensor gate = at::silu(p.project_next(projector, h, c.mlp_bias));
    at::Tensor up = p.project_next(projector, h, c.mlp_bias);
    at::Tensor mlp = p.project_next(projector, gate * up, c.mlp_bias);
    return x1 + mlp;
  }

  // Final norm and LM head; logits widened to fp32 as HF's loss does (double stays double).
  at::Tensor lm_head(const at::Tensor& x, at::TensorList params, const Projector& projector) const {
    at::Tensor logits = projector.project(1, rms_norm(x, params[0], config_.rms_norm_eps), params[1], std::nullopt);
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
