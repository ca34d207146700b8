// The planner's model shape from a Hugging Face config.json, without LibTorch (the full parser,
// engine/model/model_config.h, lives in the LibTorch-linked model library).
#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "engine/plan/plan.h"

namespace tierzero::engine {
namespace {

using nlohmann::json;

// Reads integer `key` into `out`: required keys must be present; every value must be > 0.
Status read_size(const json& j, const std::string& origin, const char* key, bool required, int64_t& out) {
  if (!j.contains(key) || j[key].is_null()) {
    if (!required) return {};
    return invalid_argument(origin + ": required key \"" + key + "\" is missing; expected a Hugging Face config.json");
  }
  if (!j[key].is_number_integer() || j[key].get<int64_t>() <= 0)
    return invalid_argument(origin + ": key \"" + key + "\" must be a positive integer, got " + j[key].dump());
  out = j[key].get<int64_t>();
  return {};
}

bool flag(const json& j, const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); }

}  // namespace

Result<ModelDims> parse_model_dims(std::string_view json_text, const std::string& origin) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument(origin + ": not a JSON object; expected a Hugging Face config.json");
  ModelDims m;
  TZ_RETURN_IF_ERROR(read_size(j, origin, "vocab_size", true, m.vocab_size));
  TZ_RETURN_IF_ERROR(read_size(j, origin, "hidden_size", true, m.hidden_size));
  TZ_RETURN_IF_ERROR(read_size(j, origin, "intermediate_size", true, m.intermediate_size));
  TZ_RETURN_IF_ERROR(read_size(j, origin, "num_hidden_layers", true, m.num_hidden_layers));
  TZ_RETURN_IF_ERROR(read_size(j, origin, "num_attention_heads", true, m.num_attention_heads));
  m.num_key_value_heads = m.num_attention_heads;
  TZ_RETURN_IF_ERROR(read_size(j, origin, "num_key_value_heads", false, m.num_key_value_heads));
  const std::string model_type =
      j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  const bool gemma = model_type == "gemma2" || model_type == "gemma3_text";
  // The config classes' head_dim defaults when the key is absent (Qwen3 128, Gemma 256).
  m.head_dim = model_type == "qwen3" ? 128 : gemma ? 256 : m.hidden_size / m.num_attention_heads;
  TZ_RETURN_IF_ERROR(read_size(j, origin, "head_dim", false, m.head_dim));
  if (m.head_dim <= 0 || m.num_attention_heads % m.num_key_value_heads != 0)
    return invalid_argument(origin + ": num_attention_heads " + std::to_string(m.num_attention_heads) +
                            " must be a multiple of num_key_value_heads " + std::to_string(m.num_key_value_heads) +
                            " and give a head_dim > 0");
  m.tie_word_embeddings = gemma ? !(j.contains("tie_word_embeddings") && j["tie_word_embeddings"].is_boolean() &&
                                    !j["tie_word_embeddings"].get<bool>())
                                : flag(j, "tie_word_embeddings");
  const bool all_four_biased = model_type == "llama" || model_type == "qwen3" || gemma;
  m.qkv_bias = model_type == "qwen2" || (all_four_biased && flag(j, "attention_bias"));
  m.o_proj_bias = all_four_biased && flag(j, "attention_bias");
  m.mlp_bias = model_type == "llama" && flag(j, "mlp_bias");
  m.qk_norm = model_type == "qwen3" || model_type == "gemma3_text";
  m.fused_projections = model_type == "phi3";
  m.sandwich_norms = gemma;
  // Gemma 2's attn_logit_softcapping defaults to 50; null turns it off.
  m.eager_attention = model_type == "gemma2" && !(j.contains("attn_logit_softcapping") && j["attn_logit_softcapping"].is_null());
  return m;
}

Result<ModelDims> load_model_dims(const std::string& path) {
  struct stat st {};
  const std::string file = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? path + "/config.json" : path;
  std::ifstream in(file);
  if (!in) return not_found(file + ": cannot open; pass a Hugging Face config.json or the model directory holding it");
  std::stringstream text;
  text << in.rdbuf();
  return parse_model_dims(text.str(), file);
}

}  // namespace tierzero::engine
