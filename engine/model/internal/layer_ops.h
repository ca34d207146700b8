// The ops the decoder-layer families share (engine/model/*_layer.cpp): the two RMSNorm styles, the
// MLP activation, causal self-attention, and the cursor that hands out a unit's parameters. Each
// mirrors transformers' modeling code (same dtype casts in the same places). Private to engine/model.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/model/internal/model_config.h"

namespace tierzero::engine {

// LlamaRMSNorm (Qwen, Mistral, Phi-3 alike): normalise in fp32 (double stays double), cast back,
// then scale by the weight in the input's dtype. A 16-bit input on a CUDA device goes through
// LibTorch's fused RMSNorm instead (one kernel each way, ~10-20 % of a decoder layer's step on an
// H100: benchmarks/layer_kernels.py), which scales by the weight in fp32 before the one cast back:
// at most a unit in the last place from transformers' two roundings.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// Gemma's RMSNorm: normalise and scale by (1 + weight) all in fp32 (double stays double), then cast
// back to the input's dtype.
at::Tensor gemma_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// The MLP's gate activation: silu (SwiGLU) or gelu with the tanh approximation (GeGLU).
at::Tensor gate_activation(const ModelConfig& config, const at::Tensor& x);

// Causal self-attention of decoder layer `layer`: q [B,Hq,T,D], k and v [B,Hkv,T,D] (GQA when
// Hkv < Hq) -> [B,Hq,T,D]. Scores scaled by `scale`; the layer's sliding window applied where the
// config gives it one. Without `softcap`: scaled_dot_product_attention (transformers' sdpa path);
// with it: transformers' eager path (matmul, cap * tanh(scores / cap), additive mask, softmax in
// fp32 (double stays double) cast back, matmul), as Gemma 2 runs.
at::Tensor causal_attention(const ModelConfig& config, int64_t layer, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, std::optional<double> softcap);

// causal_attention for the T positions after those `cache` holds (q, k, v as there, for the new
// positions): k and v are appended to the cache, and each query attends to the cached keys and the
// new ones up to its own position (within the layer's sliding window), as transformers' generate
// does with its cache (a sliding layer's attention runs over the window's keys alone). Without a
// cache, or with an empty one, it is causal_attention (and fills the cache).
at::Tensor cached_attention(const ModelConfig& config, int64_t layer, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, double scale, std::optional<double> softcap, LayerKvCache* cache);

// rope_cos_sin's rows for the `seq_len` positions after the first `past`: rows past.. of
// rope_cos_sin(config, past + seq_len), the frequencies transformers uses for them once the
// sequence is past + seq_len long (dynamic NTK and LongRoPE pick theirs by that length);
// rope_cos_sin(config, seq_len) itself when past is 0.
std::pair<at::Tensor, at::Tensor> rope_after(const ModelConfig& config, int64_t past, int64_t seq_len,
                                             at::ScalarType dtype, at::Device device, bool sliding_layer);

// Hands out a unit's parameters in unit_params order, with the optional biases in place.
class ParamCursor {
 public:
  explicit ParamCursor(at::TensorList params) : params_(params) {}
  const at::Tensor& next() { return params_[i_++]; }
  std::optional<at::Tensor> next_if(bool present) { return present ? std::optional<at::Tensor>(next()) : std::nullopt; }
  // Projects x through the next weight (and the bias after it when `has_bias`) with `projector`;
  // the projector sees the weight's position in the unit's parameter list.
  at::Tensor project_next(const Projector& projector, const at::Tensor& x, bool has_bias) {
    const size_t weight_index = i_;
    const at::Tensor& weight = next();
    return projector.project(weight_index, x, weight, next_if(has_bias));
  }

 private:
  at::TensorList params_;
  size_t i_ = 0;
};

// Appends the specs of one nn.Linear named `prefix + name` ([out, in] weight, then [out] bias when
// `bias`).
void add_linear_specs(std::vector<ParamSpec>& specs, const std::string& prefix, const std::string& name, int64_t out,
                      int64_t in, bool bias);

// The attention half of a decoder layer named `prefix` ("model.layers.N."), in forward order, as
// the Llama-style and Gemma families share it: input_layernorm, q/k/v_proj, q/k norms (qk_norm),
// o_proj, post_attention_layernorm.
std::vector<ParamSpec> attention_block_specs(const ModelConfig& c, const std::string& prefix);

// ---- The decoder-layer families: parameters of layer `layer` in forward order, and its forward ----
// (x [B,T,H] -> [B,T,H], every nn.Linear through `projector`; params in the specs' order; with a
// `cache`, x holds the positions after the cached ones: cached_attention).

// Llama, Qwen2, Qwen3, Mistral: input_layernorm, q/k/v_proj, [q_norm, k_norm], o_proj,
// post_attention_layernorm, gate/up/down_proj (each weight then its bias where present).
std::vector<ParamSpec> llama_layer_params(const ModelConfig& config, int64_t layer);
at::Tensor llama_layer(const ModelConfig& config, int64_t layer, const at::Tensor& x, at::TensorList params,
                       const Projector& projector, LayerKvCache* cache = nullptr);

// Phi-3: input_layernorm, qkv_proj, o_proj, post_attention_layernorm, gate_up_proj, down_proj.
std::vector<ParamSpec> phi3_layer_params(const ModelConfig& config, int64_t layer);
at::Tensor phi3_layer(const ModelConfig& config, int64_t layer, const at::Tensor& x, at::TensorList params,
                      const Projector& projector, LayerKvCache* cache = nullptr);

// Gemma 2 / 3: input_layernorm, q/k/v_proj, [q_norm, k_norm], o_proj, post_attention_layernorm,
// pre_feedforward_layernorm, gate/up/down_proj, post_feedforward_layernorm.
std::vector<ParamSpec> gemma_layer_params(const ModelConfig& config, int64_t layer);
at::Tensor gemma_layer(const ModelConfig& config, int64_t layer, const at::Tensor& x, at::TensorList params,
                       const Projector& projector, LayerKvCache* cache = nullptr);

}  // namespace tierzero::engine
