// lora_unit_numels (internal/model_params.h): the adapters a tierzero.lora run trains, by unit.
#include <string>

#include "engine/plan/internal/model_params.h"

namespace tierzero::engine::plan {
namespace {

// One linear projection of a decoder layer: its path inside the layer, in and out features.
struct Linear {
  const char* name;
  int64_t in;
  int64_t out;
};

// A decoder layer's projections in unit_params order, named as the Hugging Face modules are.
std::vector<Linear> layer_linears(const ModelDims& m) {
  const int64_t h = m.hidden_size, q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  const int64_t i = m.intermediate_size;
  if (m.fused_projections)
    return {{"self_attn.qkv_proj", h, q + 2 * kv}, {"self_attn.o_proj", q, h}, {"mlp.gate_up_proj", h, 2 * i},
            {"mlp.down_proj", i, h}};
  return {{"self_attn.q_proj", h, q},   {"self_attn.k_proj", h, kv}, {"self_attn.v_proj", h, kv},
          {"self_attn.o_proj", q, h},   {"mlp.gate_proj", h, i},     {"mlp.up_proj", h, i},
          {"mlp.down_proj", i, h}};
}

}  // namespace

Result<std::vector<std::vector<int64_t>>> lora_unit_numels(const ModelDims& m, const LoraConfig& lora) {
  std::vector<std::vector<int64_t>> units(static_cast<size_t>(m.num_hidden_layers) + 2);
  const std::vector<Linear> linears = layer_linears(m);
  for (int64_t layer = 0; layer < m.num_hidden_layers; ++layer) {
    for (const Linear& linear : linears) {
      const std::string path = "model.layers." + std::to_string(layer) + "." + linear.name;
      if (!lora_targets_module(lora.target_modules, lora.target_pattern, path)) continue;
      units[static_cast<size_t>(layer) + 1].push_back(lora.r * linear.in);
      units[static_cast<size_t>(layer) + 1].push_back(linear.out * lora.r);
    }
  }
  for (const std::vector<int64_t>& unit : units)
    if (!unit.empty()) return units;
  std::string names;
  for (const Linear& linear : linears) names += (names.empty() ? "" : ", ") + std::string(linear.name);
  return invalid_argument("tierzero.lora.target_modules match no linear module of the model; a decoder layer's are " +
                          names + " (model.layers.N.<name>; the embedding and the LM head are not adapted): name "
                          "some of them, e.g. [\"q_proj\", \"v_proj\"], or use \"all-linear\"");
}

}  // namespace tierzero::engine::plan
