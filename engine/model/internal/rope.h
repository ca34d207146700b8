// Rotary position embedding exactly as transformers' LlamaRotaryEmbedding computes it
// (modeling_rope_utils.py, transformers 5.x): same fp32 ops in the same order, so cos/sin match
// HF bit for bit on the same device. Private to engine/model (and its tests).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "engine/model/internal/model_config.h"

namespace tierzero::engine {

// Inverse frequencies [head_dim / 2], fp32 on `device`, for a sequence of `seq_len` positions.
// "dynamic" is the one type that depends on seq_len: above max_position_embeddings the base grows
// with it (HF caches the largest length seen; this is a pure function of the current one).
at::Tensor rope_inv_freq(const ModelConfig& config, int64_t seq_len, at::Device device);

// (cos, sin), each [seq_len, head_dim] in `dtype`, for positions 0..seq_len-1: computed in fp32
// then cast, as HF does.
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const ModelConfig& config, int64_t seq_len, at::ScalarType dtype,
                                               at::Device device);

// Rotates x [B, heads, T, head_dim] by (cos, sin) [T, head_dim]: x * cos + rotate_half(x) * sin.
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace tierzero::engine
