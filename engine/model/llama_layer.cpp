// The Llama / Qwen2 / Qwen3 / Mistral decoder layer, as transformers' modeling_llama.py,
// modeling_qwen2.py, modeling_qwen3.py and modeling_mistral.py compute it.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "engine/model/internal/layer_ops.h"
#include "engine/model/internal/rope.h"

namespace tierzero::engine {

std::vector<ParamSpec> llama_layer_params(const ModelConfig& c, int64_t layer) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  std::vector<ParamSpec> specs = attention_block_specs(c, p);
  add_linear_specs(specs, p, "mlp.gate_proj", inter, h, c.mlp_bias);
  add_linear_specs(specs, p, "mlp.up_proj", inter, h, c.mlp_bias);
  add_linear_specs(specs, p, "mlp.down_proj", h, inter, c.mlp_bias);
  return specs;
}

at::Tensor llama_layer(const ModelConfig& c, int64_t layer, const at::Tensor& x, at::TensorList params,
                       const Projector& projector, LayerKvCache* cache) {
  ParamCursor p(params);
  const int64_t batch = x.size(0), seq_len = x.size(1), past = cache ? cache->length() : 0;
  const std::array<int64_t, 4> heads_shape = {batch, seq_len, -1, c.head_dim};

  at::Tensor h = rms_norm(x, p.next(), c.rms_norm_eps);
  at::Tensor q = p.project_next(projector, h, c.qkv_bias).view(heads_shape);
  at::Tensor k = p.project_next(projector, h, c.qkv_bias).view(heads_shape);
  at::Tensor v = p.project_next(projector, h, c.qkv_bias).view(heads_shape).transpose(1, 2);
  if (c.qk_norm) {  // Qwen3: per-head RMSNorm before the transpose and RoPE
    q = rms_norm(q, p.next(), c.rms_norm_eps);
    k = rms_norm(k, p.next(), c.rms_norm_eps);
  }
  auto [cos, sin] = rope_after(c, past, seq_len, x.scalar_type(), x.device(), /*sliding_layer=*/false);
  q = apply_rope(q.transpose(1, 2), cos, sin);
  k = apply_rope(k.transpose(1, 2), cos, sin);

  const double scale = std::pow(static_cast<double>(c.head_dim), -0.5);
  at::Tensor attn = cached_attention(c, layer, q, k, v, scale, std::nullopt, cache);
  attn = attn.transpose(1, 2).reshape({batch, seq_len, -1});
  at::Tensor x1 = x + p.project_next(projector, attn, c.o_proj_bias);

  h = rms_norm(x1, p.next(), c.rms_norm_eps);
  at::Tensor gate = gate_activation(c, p.project_next(projector, h, c.mlp_bias));
  at::Tensor up = p.project_next(projector, h, c.mlp_bias);
  return x1 + p.project_next(projector, gate * up, c.mlp_bias);
}

}  // namespace tierzero::engine
