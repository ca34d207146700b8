// Private: transformers' parameter registration order for the supported families (Llama, Qwen2,
// Qwen3, Mistral, Phi-3, Gemma 2/3): model.embed_tokens; per layer, in index order, self_attn
// q/k/v/o (weight, bias; Phi-3: o then the fused qkv; Qwen3 / Gemma 3: then q_norm, k_norm), mlp
// gate/up/down (weight, bias; Phi-3: the fused gate_up then down), input_layernorm,
// post_attention_layernorm (Gemma: then pre/post_feedforward_layernorm); model.norm; lm_head.
// DeepSpeed's flat groups follow it when its optimizer is built from model.parameters().
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/common.h"

namespace tierzero::checkpoint {

// The sort key of parameter `name` in that order: (section, layer index, slot). kUnsupported naming
// the parameter when it is not one of those families' names.
Result<std::array<int64_t, 3>> hf_parameter_rank(const std::string& name);

}  // namespace tierzero::checkpoint
