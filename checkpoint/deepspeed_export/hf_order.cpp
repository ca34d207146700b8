#include "checkpoint/deepspeed_export/internal/hf_order.h"

#include <algorithm>

namespace tierzero::checkpoint {

Result<std::array<int64_t, 3>> hf_parameter_rank(const std::string& name) {
  // One slot order that agrees with every family's registration order: Qwen3 / Gemma 3 register
  // q_norm and k_norm after o_proj; Phi-3 registers o_proj before its fused qkv_proj and gate_up_proj
  // before down_proj; Gemma adds pre/post feed-forward norms after the two others.
  static constexpr const char* kLayerSlots[] = {
      "self_attn.q_proj.weight",          "self_attn.q_proj.bias",         "self_attn.k_proj.weight",
      "self_attn.k_proj.bias",            "self_attn.v_proj.weight",       "self_attn.v_proj.bias",
      "self_attn.o_proj.weight",          "self_attn.o_proj.bias",         "self_attn.qkv_proj.weight",
      "self_attn.q_norm.weight",          "self_attn.k_norm.weight",       "mlp.gate_proj.weight",
      "mlp.gate_proj.bias",               "mlp.up_proj.weight",            "mlp.up_proj.bias",
      "mlp.gate_up_proj.weight",          "mlp.down_proj.weight",          "mlp.down_proj.bias",
      "input_layernorm.weight",           "post_attention_layernorm.weight", "pre_feedforward_layernorm.weight",
      "post_feedforward_layernorm.weight"};
  if (name == "model.embed_tokens.weight") return std::array<int64_t, 3>{0, 0, 0};
  if (name == "model.norm.weight") return std::array<int64_t, 3>{2, 0, 0};
  if (name == "lm_head.weight") return std::array<int64_t, 3>{3, 0, 0};
  const std::string layers = "model.layers.";
  if (name.rfind(layers, 0) == 0) {
    const size_t dot = name.find('.', layers.size());
    const std::string index = name.substr(layers.size(), dot - layers.size());
    if (dot != std::string::npos && !index.empty() && index.size() < 10 &&
        std::all_of(index.begin(), index.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const std::string slot = name.substr(dot + 1);
      for (size_t s = 0; s < std::size(kLayerSlots); ++s) {
        if (slot == kLayerSlots[s]) return std::array<int64_t, 3>{1, std::stoll(index), static_cast<int64_t>(s)};
      }
    }
  }
  return unsupported("parameter '" + name +
                     "' has no known place in transformers' parameter order, which DeepSpeed's flat groups "
                     "follow; --to deepspeed supports the Llama, Qwen2, Qwen3, Mistral, Phi-3 and Gemma 2/3 names");
}

}  // namespace tierzero::checkpoint
