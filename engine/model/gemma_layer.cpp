// The Gemma 2 / Gemma 3 text decoder layer (transformers' modeling_gemma2.py, modeling_gemma3.py):
// (1 + w) RMSNorms in fp32 before and after attention and the MLP, GeGLU, scores scaled by
// query_pre_attn_scalar^-0.5, Gemma 2's attention soft-capping (its eager path), Gemma 3's q/k norms
// and local RoPE base on the sliding-window layers.
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "engine/model/internal/layer_ops.h"
#include "engine/model/internal/rope.h"

namespace tierzero::engine {

std::vector<ParamSpec> gemma_layer_params(const ModelConfig& c, int64_t layer) {
  const std::string p = fmt::format("model.layers.{}.", layer);
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  std::vector<ParamSpec> specs = attention_block_specs(c, p);
  specs.push_back({p + "pre_feedforward_layernorm.weight", {h}});
  add_linear_specs(specs, p, "mlp.gate_proj", inter, h, false);
  add_linear_specs(specs, p, "mlp.up_proj", inter, h, false);
  add_linear_specs(specs, p, "mlp.down_proj", h, inter, false);
  specs.push_back({p + "post_feedforward_layernorm.weight", {h}});
  return specs;
}

at::Tensor gemma_layer(const ModelConfig& c, int64_t layer, const at::Tensor& x, at::TensorList params,
                       const Projector& projector, LayerKvCache* cache) {
  ParamCursor p(params);
  const int64_t batch = x.size(0), seq_len = x.size(1), past = cache ? cache->length() : 0;
  const std::array<int64_t, 4> heads_shape = {batch, seq_len, -1, c.head_dim};

  at::Tensor h = gemma_rms_norm(x, p.next(), c.rms_norm_eps);
  at::Tensor q = p.project_next(projector, h, c.qkv_bias).view(heads_shape).transpose(1, 2);
  at::Tensor k = p.project_next(projector, h, c.qkv_bias).view(heads_shape).transpose(1, 2);
  at::Tensor v = p.project_next(projector, h, c.qkv_bias).view(heads_shape).transpose(1, 2);
  if (c.qk_norm) {  // Gemma 3
    q = gemma_rms_norm(q, p.next(), c.rms_norm_eps);
    k = gemma_rms_norm(k, p.next(), c.rms_norm_eps);
  }
  auto [cos, sin] = rope_after(c, past, seq_len, x.scalar_type(), x.device(), c.layer_uses_sliding_window(layer));
  q = apply_rope(q, cos, sin);
  k = apply_rope(k, cos, sin);

  const double scale = std::pow(c.query_pre_attn_scalar.value_or(static_cast<double>(c.head_dim)), -0.5);
  // Gemma 3 passes no soft-capping to its attention, whatever the config says.
  const std::optional<double> softcap =
      c.model_type == "gemma2" ? c.attn_logit_softcapping : std::optional<double>();
  at::Tensor attn = cached_attention(c, layer, q, k, v, scale, softcap, cache);
  attn = attn.transpose(1, 2).reshape({batch, seq_len, -1});
  at::Tensor attn_out = p.project_next(projector, attn, c.o_proj_bias);
  at::Tensor x1 = x + gemma_rms_norm(attn_out, p.next(), c.rms_norm_eps);

  h = gemma_rms_norm(x1, p.next(), c.rms_norm_eps);
  at::Tensor gate = gate_activation(c, p.project_next(projector, h, false));
  at::Tensor up = p.project_next(projector, h, false);
  at::Tensor mlp = p.project_next(projector, gate * up, false);
  return x1 + gemma_rms_norm(mlp, p.next(), c.rms_norm_eps);
}

}  // namespace tierzero::engine
