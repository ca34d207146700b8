#include "engine/model/internal/layer_ops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "engine/model/internal/rope.h"

namespace tierzero::engine {
namespace {

// Boolean attention mask [q_len, k_len] for the queries at positions q_first.. and the keys at
// k_first..: query q sees keys q-window+1 .. q (window: the whole causal past when nullopt).
at::Tensor causal_mask(int64_t q_first, int64_t q_len, int64_t k_first, int64_t k_len, std::optional<int64_t> window,
                       at::Device device) {
  const at::TensorOptions positions = at::TensorOptions().dtype(at::kLong).device(device);
  at::Tensor q = at::arange(q_first, q_first + q_len, positions).unsqueeze(1);
  at::Tensor k = at::arange(k_first, k_first + k_len, positions).unsqueeze(0);
  at::Tensor mask = k <= q;
  return window ? mask.logical_and(k > q - *window) : mask;
}

// repeat_kv: [B, Hkv, T, D] -> [B, Hkv * groups, T, D], each kv head repeated for its query heads.
at::Tensor repeat_kv(const at::Tensor& x, int64_t groups) {
  if (groups == 1) return x;
  const int64_t b = x.size(0), h = x.size(1), t = x.size(2), d = x.size(3);
  return x.unsqueeze(2).expand({b, h, groups, t, d}).reshape({b, h * groups, t, d});
}

// torch.finfo(type).min: the additive mask value of transformers' eager attention.
double lowest_value(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    case at::kBFloat16:
      return static_cast<float>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kHalf:
      return static_cast<float>(std::numeric_limits<c10::Half>::lowest());
    default:
      return std::numeric_limits<float>::lowest();
  }
}

// transformers' eager attention path with soft-capping: matmul, cap * tanh(scores / cap), the
// additive mask from `visible` [Tq, Tk] (none: every key visible), softmax in fp32 (double stays
// double) cast back, matmul.
at::Tensor softcapped_attention(const ModelConfig& c, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                double scale, double softcap, const std::optional<at::Tensor>& visible) {
  const int64_t groups = c.num_attention_heads / c.num_key_value_heads;
  at::Tensor scores = at::matmul(q, repeat_kv(k, groups).transpose(2, 3)) * scale;
  scores = at::tanh(scores / softcap) * softcap;
  if (visible) {
    at::Tensor mask = at::where(*visible, at::scalar_tensor(0.0, q.options()),
                                at::scalar_tensor(lowest_value(q.scalar_type()), q.options()));
    scores = scores + mask;
  }
  // Softmax in fp32 (double stays double, for the gradient checks), cast back.
  at::Tensor probs = at::softmax(scores, -1, at::promote_types(q.scalar_type(), at::kFloat)).to(q.scalar_type());
  return at::matmul(probs, repeat_kv(v, groups));
}

std::optional<int64_t> layer_window(const ModelConfig& c, int64_t layer) {
  return c.layer_uses_sliding_window(layer) ? c.sliding_window : std::optional<int64_t>();
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const bool half = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  if (x.is_cuda() && half && weight.scalar_type() == x.scalar_type()) return at::rms_norm(x, {x.size(-1)}, weight, eps);
  const at::ScalarType compute = at::promote_types(x.scalar_type(), at::kFloat);
  at::Tensor h = x.to(compute);
  at::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * at::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

at::Tensor gemma_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::ScalarType compute = at::promote_types(x.scalar_type(), at::kFloat);
  at::Tensor h = x.to(compute);
  h = h * at::rsqrt(h.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (h * (weight.to(compute) + 1.0)).to(x.scalar_type());
}

at::Tensor gate_activation(const ModelConfig& config, const at::Tensor& x) {
  return config.hidden_act == "gelu_pytorch_tanh" ? at::gelu(x, "tanh") : at::silu(x);
}

at::Tensor causal_attention(const ModelConfig& c, int64_t layer, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, std::optional<double> softcap) {
  const int64_t seq_len = q.size(2);
  const std::optional<int64_t> window = layer_window(c, layer);
  if (!softcap) {
    std::optional<at::Tensor> mask;
    if (window && seq_len > *window) mask = causal_mask(0, seq_len, 0, seq_len, window, q.device());
    return at::scaled_dot_product_attention(q, k, v, mask, /*dropout_p=*/0.0, /*is_causal=*/!mask.has_value(), scale,
                                            /*enable_gqa=*/c.num_key_value_heads != c.num_attention_heads);
  }
  return softcapped_attention(c, q, k, v, scale, *softcap, causal_mask(0, seq_len, 0, seq_len, window, q.device()));
}

at::Tensor cached_attention(const ModelConfig& c, int64_t layer, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, std::optional<double> softcap, LayerKvCache* cache) {
  if (cache == nullptr) return causal_attention(c, layer, q, k, v, scale, softcap);
  const int64_t past = cache->length();
  cache->keys = past == 0 ? k : at::cat({cache->keys, k}, 2);
  cache->values = past == 0 ? v : at::cat({cache->values, v}, 2);
  if (past == 0) return causal_attention(c, layer, q, k, v, scale, softcap);
  // Keys before the first query's window are seen by no query; transformers' sliding-window cache
  // drops them, so the attention runs over the same keys.
  const std::optional<int64_t> window = layer_window(c, layer);
  const int64_t total = cache->length();
  const int64_t first_key = window ? std::max<int64_t>(0, past + 1 - *window) : 0;
  const at::Tensor keys = cache->keys.narrow(2, first_key, total - first_key);
  const at::Tensor values = cache->values.narrow(2, first_key, total - first_key);
  // One query sees every key left; several (a prompt continued) need the causal mask.
  std::optional<at::Tensor> visible;
  const int64_t q_len = q.size(2);
  if (q_len > 1) visible = causal_mask(past, q_len, first_key, total - first_key, window, q.device());
  if (softcap) return softcapped_attention(c, q, keys, values, scale, *softcap, visible);
  return at::scaled_dot_product_attention(q, keys, values, visible, /*dropout_p=*/0.0, /*is_causal=*/false, scale,
                                          /*enable_gqa=*/c.num_key_value_heads != c.num_attention_heads);
}

std::pair<at::Tensor, at::Tensor> rope_after(const ModelConfig& c, int64_t past, int64_t seq_len, at::ScalarType dtype,
                                             at::Device device, bool sliding_layer) {
  if (past == 0) return rope_cos_sin(c, seq_len, dtype, device, sliding_layer);
  auto [cos, sin] = rope_cos_sin(c, past + seq_len, dtype, device, sliding_layer);
  return {cos.narrow(0, past, seq_len), sin.narrow(0, past, seq_len)};
}

void add_linear_specs(std::vector<ParamSpec>& specs, const std::string& prefix, const std::string& name, int64_t out,
                      int64_t in, bool bias) {
  specs.push_back({prefix + name + ".weight", {out, in}});
  if (bias) specs.push_back({prefix + name + ".bias", {out}});
}

std::vector<ParamSpec> attention_block_specs(const ModelConfig& c, const std::string& prefix) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  std::vector<ParamSpec> specs = {{prefix + "input_layernorm.weight", {h}}};
  add_linear_specs(specs, prefix, "self_attn.q_proj", q, h, c.qkv_bias);
  add_linear_specs(specs, prefix, "self_attn.k_proj", kv, h, c.qkv_bias);
  add_linear_specs(specs, prefix, "self_attn.v_proj", kv, h, c.qkv_bias);
  if (c.qk_norm) {
    specs.push_back({prefix + "self_attn.q_norm.weight", {c.head_dim}});
    specs.push_back({prefix + "self_attn.k_norm.weight", {c.head_dim}});
  }
  add_linear_specs(specs, prefix, "self_attn.o_proj", h, q, c.o_proj_bias);
  specs.push_back({prefix + "post_attention_layernorm.weight", {h}});
  return specs;
}

}  // namespace tierzero::engine
