// Rotary position embedding exactly as transformers' LlamaRotaryEmbedding computes it
// (modeling_rope_utils.py, transformers 5.x): same fp32 ops in the same order, so cos/sin match
// HF bit for bit on the same device. Private to engine/model (and its tests).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "engine/model/internal/model_config.h"

namespace tierzero::engine {

// Inverse frequencies [rotary_dim / 2], fp32 on `device`, for a sequence of `seq_len` positions.
// "dynamic" and "longrope" depend on seq_len: dynamic grows the base above max_position_embeddings
// (HF caches the largest length seen; this is a pure function of the current one); longrope takes
// long_factor above original_max_position_embeddings, short_factor up to it. `sliding_layer`:
// the inverse frequencies of a sliding-window layer (Gemma 3's plain RoPE on rope_local_base_freq;
// the same as the other layers' in every other family).
at::Tensor rope_inv_freq(const ModelConfig& config, int64_t seq_len, at::Device device, bool sliding_layer = false);

// (cos, sin), each [seq_len, rotary_dim] in `dtype`, for positions 0..seq_len-1: computed in fp32,
// scaled by the type's attention factor (longrope's; 1 otherwise), then cast, as HF does.
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const ModelConfig& config, int64_t seq_len, at::ScalarType dtype,
                                               at::Device device, bool sliding_layer = false);

// Rotates x [B, heads, T, head_dim] by (cos, sin) [T, rotary_dim]: x * cos + rotate_half(x) * sin on
// the leading rotary_dim channels; the rest pass through (Phi-3's partial rotary).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace tierzero::engine
