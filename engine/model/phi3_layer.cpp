// The Phi-3 / Phi-4 decoder layer (transformers' modeling_phi3.py): fused qkv_proj and gate_up_proj,
// partial rotary, the sliding window on every layer when the config sets one.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "engine/model/internal/layer_ops.h"
#include "engine/model/internal/rope.h"

namespace tierzero::engine {

std::vector<ParamSpec> phi3_layer_params(const ModelConfig& c, int64_t layer) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  return {{p + "input_layernorm.weight", {h}},
          {p + "self_attn.qkv_proj.weight", {q + 2 * kv, h}},
          {p + "self_attn.o_proj.weight", {h, q}},
          {p + "post_attention_layernorm.weight", {h}},
          {p + "mlp.gate_up_proj.weight", {2 * c.intermediate_size, h}},
          {p + "mlp.down_proj.weight", {h, c.intermediate_size}}};
}

at::Tensor phi3_layer(const ModelConfig& c, int64_t layer, const at::Tensor& x, at::TensorList params,
                      const Projector& projector, LayerKvCache* cache) {
  ParamCursor p(params);
  const int64_t batch = x.size(0), seq_len = x.size(1), past = cache ? cache->length() : 0;
  const int64_t q_width = c.num_attention_heads * c.head_dim, kv_width = c.num_key_value_heads * c.head_dim;
  const std::array<int64_t, 4> heads_shape = {batch, seq_len, -1, c.head_dim};

  at::Tensor h = rms_norm(x, p.next(), c.rms_norm_eps);
  at::Tensor qkv = p.project_next(projector, h, /*has_bias=*/false);
  at::Tensor q = qkv.narrow(-1, 0, q_width).view(heads_shape).transpose(1, 2);
  at::Tensor k = qkv.narrow(-1, q_width, kv_width).view(heads_shape).transpose(1, 2);
  at::Tensor v = qkv.narrow(-1, q_width + kv_width, kv_width).view(heads_shape).transpose(1, 2);
  auto [cos, sin] = rope_after(c, past, seq_len, x.scalar_type(), x.device(), /*sliding_layer=*/false);
  q = apply_rope(q, cos, sin);
  k = apply_rope(k, cos, sin);

  const double scale = std::pow(static_cast<double>(c.head_dim), -0.5);
  at::Tensor attn = cached_attention(c, layer, q, k, v, scale, std::nullopt, cache);
  attn = attn.transpose(1, 2).reshape({batch, seq_len, -1});
  at::Tensor x1 = x + p.project_next(projector, attn, false);

  h = rms_norm(x1, p.next(), c.rms_norm_eps);
  std::vector<at::Tensor> gate_up = p.project_next(projector, h, false).chunk(2, -1);
  return x1 + p.project_next(projector, gate_up[1] * gate_activation(c, gate_up[0]), false);
}

}  // namespace tierzero::engine
