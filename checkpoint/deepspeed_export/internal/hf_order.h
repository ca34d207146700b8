// Private: transformers' parameter registration order for the Llama family (LlamaForCausalLM,
// Qwen2, Mistral): model.embed_tokens; per layer, in index order, self_attn q/k/v/o (weight, bias),
// mlp gate/up/down (weight, bias), input_layernorm, post_attention_layernorm; model.norm; lm_head.
// DeepSpeed's flat groups follow it when its optimizer is built from model.parameters().
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "common/common.h"

namespace tierzero::checkpoint {

// The sort key of parameter `name` in that order: (section, layer index, slot). kUnsupported naming
// the parameter when it is not a Llama-family name.
Result<std::array<int64_t, 3>> hf_parameter_rank(const std::string& name);

}  // namespace tierzero::checkpoint
