#include "engine/model/internal/model_config.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tierzero::engine {
namespace {

using nlohmann::json;

// Reads typed keys of one JSON object; the first failure is kept and names origin and key.
class KeyReader {
 public:
  KeyReader(const json& object, std::string origin) : object_(object), origin_(std::move(origin)) {}

  bool has(const char* key) const { return object_.contains(key) && !object_.at(key).is_null(); }

  // Reads a required or optional integer key into `out` (left unchanged when optional and absent).
  void integer(const char* key, int64_t& out, bool required = false) {
    if (!has(key)) {
      if (required) fail(fmt::format("required key \"{}\" is missing", key));
      return;
    }
    const json& v = object_.at(key);
    if (!v.is_number_integer()) return fail(fmt::format("key \"{}\" must be an integer, got {}", key, v.dump()));
    out = v.get<int64_t>();
  }

  void number(const char* key, double& out) {
    if (!has(key)) return;
    const json& v = object_.at(key);
    if (!v.is_number()) return fail(fmt::format("key \"{}\" must be a number, got {}", key, v.dump()));
    out = v.get<double>();
  }

  void boolean(const char* key, bool& out) {
    if (!has(key)) return;
    const json& v = object_.at(key);
    if (!v.is_boolean()) return fail(fmt::format("key \"{}\" must be true or false, got {}", key, v.dump()));
    out = v.get<bool>();
  }

  void string(const char* key, std::string& out) {
    if (!has(key)) return;
    const json& v = object_.at(key);
    if (!v.is_string()) return fail(fmt::format("key \"{}\" must be a string, got {}", key, v.dump()));
    out = v.get<std::string>();
  }

  void fail(const std::string& what) {
    if (status_.ok()) status_ = invalid_argument(fmt::format("{}: {}", origin_, what));
  }
  const Status& status() const { return status_; }

 private:
  const json& object_;
  std::string origin_;
  Status status_;
};

// Maps model_type <-> architectures[0] for the supported family.
struct Family {
  const char* model_type;
  const char* architecture;
};
constexpr Family kFamilies[] = {
    {"llama", "LlamaForCausalLM"},   {"qwen2", "Qwen2ForCausalLM"},   {"qwen3", "Qwen3ForCausalLM"},
    {"mistral", "MistralForCausalLM"}, {"phi3", "Phi3ForCausalLM"},   {"gemma2", "Gemma2ForCausalLM"},
    {"gemma3_text", "Gemma3ForCausalLM"},
};

Status read_family(const json& j, const std::string& origin, ModelConfig& c) {
  KeyReader r(j, origin);
  std::string model_type, architecture;
  r.string("model_type", model_type);
  if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty() &&
      j["architectures"][0].is_string()) {
    architecture = j["architectures"][0].get<std::string>();
  }
  TZ_RETURN_IF_ERROR(r.status());
  for (const Family& f : kFamilies) {
    if (model_type == f.model_type || (model_type.empty() && architecture == f.architecture)) {
      c.model_type = f.model_type;
      c.architecture = architecture.empty() ? f.architecture : architecture;
      return {};
    }
  }
  return unsupported(
      fmt::format("{}: model_type \"{}\" (architectures[0] \"{}\") is not supported; tierzero runs the decoder-only "
                  "llama, qwen2, qwen3, mistral, phi3, gemma2 and gemma3_text (Gemma3ForCausalLM) families",
                  origin, model_type, architecture));
}

// Reads one RoPE dict ({rope_type | type, rope_theta, factor, ...}) into `s` and `theta`.
Status read_rope_dict(const json& d, const std::string& origin, RopeScaling& s, double& theta,
                      double& partial_rotary_factor) {
  if (!d.is_object()) return invalid_argument(fmt::format("{}: must be an object", origin));
  KeyReader r(d, origin);
  r.string("type", s.type);
  r.string("rope_type", s.type);
  r.number("rope_theta", theta);
  r.number("factor", s.factor);
  r.number("low_freq_factor", s.low_freq_factor);
  r.number("high_freq_factor", s.high_freq_factor);
  r.integer("original_max_position_embeddings", s.original_max_position_embeddings);
  r.number("partial_rotary_factor", partial_rotary_factor);
  if (r.has("attention_factor")) {
    double attention_factor = 1.0;
    r.number("attention_factor", attention_factor);
    s.attention_factor = attention_factor;
  }
  for (auto [key, out] : {std::pair{"short_factor", &s.short_factor}, std::pair{"long_factor", &s.long_factor}}) {
    if (!r.has(key)) continue;
    const json& v = d.at(key);
    if (!v.is_array() || !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); })) {
      r.fail(fmt::format("key \"{}\" must be a list of numbers", key));
      continue;
    }
    *out = v.get<std::vector<double>>();
  }
  return r.status();
}

// LongRoPE without "factor" in `rope_dict` (nullptr: no dict): max_position_embeddings /
// original_max_position_embeddings, as transformers' _compute_longrope_parameters.
void set_default_longrope_factor(const json* rope_dict, ModelConfig& c) {
  RopeScaling& s = c.rope_scaling;
  if (s.type != "longrope" || (rope_dict && rope_dict->contains("factor"))) return;
  s.factor = static_cast<double>(c.max_position_embeddings) / static_cast<double>(s.original_max_position_embeddings);
}

// Gemma 3's RoPE: rope_parameters {full_attention: {...}, sliding_attention: {...}} (transformers
// >= 5), or rope_theta (default 1e6) + rope_scaling for the full-attention layers and
// rope_local_base_freq (default 1e4) for the sliding ones.
Status read_gemma3_rope(const json& j, const std::string& origin, ModelConfig& c) {
  KeyReader top(j, origin);
  c.rope_theta = 1e6;
  double local_theta = 1e4, partial_rotary_factor = 1.0;
  c.rope_scaling.original_max_position_embeddings = c.max_position_embeddings;
  top.number("rope_theta", c.rope_theta);
  top.number("rope_local_base_freq", local_theta);
  TZ_RETURN_IF_ERROR(top.status());
  const bool nested = top.has("rope_parameters");
  if (nested || top.has("rope_scaling")) {
    const json& d = j.at(nested ? "rope_parameters" : "rope_scaling");
    const std::string key = nested ? "rope_parameters" : "rope_scaling";
    if (nested && (!d.is_object() || !d.contains("full_attention"))) {
      return invalid_argument(fmt::format("{}: rope_parameters must hold \"full_attention\" and \"sliding_attention\"", origin));
    }
    TZ_RETURN_IF_ERROR(read_rope_dict(nested ? d.at("full_attention") : d, fmt::format("{} ({})", origin, key),
                                      c.rope_scaling, c.rope_theta, partial_rotary_factor));
    set_default_longrope_factor(nested ? &d.at("full_attention") : &d, c);
    if (nested && d.contains("sliding_attention") && !d["sliding_attention"].is_null()) {
      RopeScaling local;
      TZ_RETURN_IF_ERROR(read_rope_dict(d.at("sliding_attention"),
                                        fmt::format("{} (rope_parameters.sliding_attention)", origin), local,
                                        local_theta, partial_rotary_factor));
      if (local.type != "default") {
        return unsupported(fmt::format(
            "{}: rope_parameters.sliding_attention rope_type \"{}\" is not supported (only \"default\")", origin,
            local.type));
      }
    }
  }
  c.rope_local_base_freq = local_theta;
  if (partial_rotary_factor != 1.0) {
    return unsupported(fmt::format("{}: partial_rotary_factor {} is not supported for gemma3_text (only 1.0)", origin,
                                   partial_rotary_factor));
  }
  return {};
}

// rope_theta and the scaling: transformers >= 5 writes "rope_parameters" {rope_type, rope_theta, ...};
// older files write top-level "rope_theta" and "rope_scaling" {type | rope_type, factor, ...}. A
// top-level original_max_position_embeddings wins over the dict's (as transformers' standardize_rope_params;
// Phi-3's defaults to 4096). Phi-3 alone reads partial_rotary_factor (the dict's, else the top-level key)
// and calls longrope "su" or "yarn" too.
Status read_rope(const json& j, const std::string& origin, ModelConfig& c) {
  if (c.model_type == "gemma3_text") return read_gemma3_rope(j, origin, c);
  const bool phi3 = c.model_type == "phi3";
  KeyReader top(j, origin);
  top.number("rope_theta", c.rope_theta);
  double partial_rotary_factor = 1.0;
  if (phi3) top.number("partial_rotary_factor", partial_rotary_factor);
  RopeScaling& s = c.rope_scaling;
  const char* dict_key = top.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (top.has(dict_key)) {  // without one, original_max_position_embeddings stays 0 (unused)
    s.original_max_position_embeddings = c.max_position_embeddings;
    TZ_RETURN_IF_ERROR(read_rope_dict(j.at(dict_key), fmt::format("{} ({})", origin, dict_key), s, c.rope_theta,
                                      partial_rotary_factor));
  }
  if (phi3) s.original_max_position_embeddings = 4096;
  top.integer("original_max_position_embeddings", s.original_max_position_embeddings);
  TZ_RETURN_IF_ERROR(top.status());
  if (phi3 && (s.type == "su" || s.type == "yarn")) s.type = "longrope";
  set_default_longrope_factor(top.has(dict_key) ? &j.at(dict_key) : nullptr, c);
  if (phi3) {
    c.partial_rotary_factor = partial_rotary_factor;
  } else if (partial_rotary_factor != 1.0) {
    return unsupported(fmt::format("{}: {}.partial_rotary_factor {} is not supported for {} (only 1.0; phi3 rotates "
                                   "part of each head)",
                                   origin, dict_key, partial_rotary_factor, c.model_type));
  }
  if (phi3 && s.type != "default" && s.type != "longrope") {
    return unsupported(fmt::format("{}: rope type \"{}\" is not supported for phi3 (default, longrope / su), as in "
                                   "transformers",
                                   origin, s.type));
  }
  return {};
}

// The most decoder layers a model config may have (validate_model_config).
constexpr int64_t kMaxHiddenLayers = int64_t{1} << 14;

// Which layers use the sliding window; see ModelConfig::sliding_window_layers. Llama has none.
Status read_sliding_window(const json& j, const std::string& origin, ModelConfig& c) {
  KeyReader r(j, origin);
  const std::string& type = c.model_type;
  const bool qwen = type == "qwen2" || type == "qwen3";
  // Mistral, Gemma: on unless "sliding_window" is null; Qwen: "use_sliding_window"; Phi-3: a
  // non-null "sliding_window" (its default is null).
  bool use_sliding_window = type == "mistral" || c.is_gemma() || (type == "phi3" && r.has("sliding_window"));
  if (qwen) r.boolean("use_sliding_window", use_sliding_window);
  int64_t window = 4096;  // transformers' default when the key is absent
  if (j.contains("sliding_window") && j["sliding_window"].is_null()) use_sliding_window = false;
  r.integer("sliding_window", window);
  int64_t max_window_layers = type == "qwen2" || type == "qwen3" ? 28 : 0;
  if (qwen) r.integer("max_window_layers", max_window_layers);
  // Gemma without layer_types: every pattern-th layer is global (Gemma 2: 2; Gemma 3: 6).
  int64_t pattern = type == "gemma3_text" ? 6 : 2;
  if (type == "gemma3_text") {
    r.integer("_sliding_window_pattern", pattern);
    r.integer("sliding_window_pattern", pattern);
  }
  bool bidirectional = false;
  if (c.is_gemma()) r.boolean("use_bidirectional_attention", bidirectional);
  TZ_RETURN_IF_ERROR(r.status());
  if (bidirectional) {
    return unsupported(fmt::format("{}: use_bidirectional_attention true is not supported (tierzero trains causal LMs)",
                                   origin));
  }
  if (pattern < 1) return invalid_argument(fmt::format("{}: sliding_window_pattern {} must be >= 1", origin, pattern));
  // validate_model_config refuses such a layer count next; nothing is sized by it before (fuzzing:
  // num_hidden_layers -2 threw length_error from here).
  if (c.num_hidden_layers < 1 || c.num_hidden_layers > kMaxHiddenLayers) return {};
  c.sliding_window_layers.assign(c.num_hidden_layers, false);
  if (!use_sliding_window || type == "llama") return {};
  c.sliding_window = window;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    c.sliding_window_layers[i] = c.is_gemma() ? (i + 1) % pattern != 0 : i >= max_window_layers;
  }
  if ((qwen || c.is_gemma()) && j.contains("layer_types") && j["layer_types"].is_array()) {
    const json& types = j["layer_types"];
    if (static_cast<int64_t>(types.size()) != c.num_hidden_layers) {
      return invalid_argument(fmt::format("{}: layer_types has {} entries but num_hidden_layers is {}", origin,
                                          types.size(), c.num_hidden_layers));
    }
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      c.sliding_window_layers[i] = types[i].is_string() && types[i].get<std::string>() == "sliding_attention";
    }
  }
  return {};
}

// Reads an optional number that JSON null (or absence) turns off, with the family's default.
void read_optional_number(KeyReader& r, const json& j, const char* key, std::optional<double> fallback,
                          std::optional<double>& out) {
  out = fallback;
  if (j.contains(key) && j[key].is_null()) out.reset();
  if (!r.has(key)) return;
  double value = 0.0;
  r.number(key, value);
  out = value;
}

// Gemma's keys: hidden_activation, query_pre_attn_scalar, the soft-capping values (Gemma 2's
// defaults 50 and 30; Gemma 3's none).
Status read_gemma(const json& j, const std::string& origin, ModelConfig& c) {
  KeyReader r(j, origin);
  c.hidden_act = "gelu_pytorch_tanh";
  r.string("hidden_activation", c.hidden_act);
  read_optional_number(r, j, "query_pre_attn_scalar", 256.0, c.query_pre_attn_scalar);
  const bool gemma2 = c.model_type == "gemma2";
  read_optional_number(r, j, "attn_logit_softcapping", gemma2 ? std::optional<double>(50.0) : std::nullopt,
                       c.attn_logit_softcapping);
  read_optional_number(r, j, "final_logit_softcapping", gemma2 ? std::optional<double>(30.0) : std::nullopt,
                       c.final_logit_softcapping);
  // Gemma 3 passes no soft-capping to its attention (transformers' Gemma3Attention): the key is
  // kept for the export but has no effect.
  return r.status();
}

}  // namespace

Status validate_model_config(const ModelConfig& c) {
  auto positive = [](int64_t v) { return v > 0; };
  if (!positive(c.vocab_size) || !positive(c.hidden_size) || !positive(c.intermediate_size) ||
      !positive(c.num_hidden_layers) || !positive(c.num_attention_heads) || !positive(c.num_key_value_heads) ||
      !positive(c.head_dim)) {
    return invalid_argument(
        fmt::format("model config: sizes must be positive (vocab_size {}, hidden_size {}, intermediate_size {}, "
                    "num_hidden_layers {}, num_attention_heads {}, num_key_value_heads {}, head_dim {})",
                    c.vocab_size, c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.num_attention_heads,
                    c.num_key_value_heads, c.head_dim));
  }
  // Far above any real model (Llama 3.1 405B: hidden 16384, intermediate 53248, vocab 128256, 126
  // layers, 128 heads), and small enough that the parameter count of every shape fits int64_t.
  struct Limit {
    const char* key;
    int64_t value, max;
  };
  for (const Limit& l :
       {Limit{"vocab_size", c.vocab_size, int64_t{1} << 24}, Limit{"hidden_size", c.hidden_size, int64_t{1} << 20},
        Limit{"intermediate_size", c.intermediate_size, int64_t{1} << 22},
        Limit{"num_hidden_layers", c.num_hidden_layers, kMaxHiddenLayers},
        Limit{"num_attention_heads", c.num_attention_heads, int64_t{1} << 12},
        Limit{"head_dim", c.head_dim, int64_t{1} << 12}}) {
    if (l.value > l.max)
      return invalid_argument(
          fmt::format("model config: {} {} is larger than tierzero supports ({})", l.key, l.value, l.max));
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return invalid_argument(
        fmt::format("model config: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                    c.num_attention_heads, c.num_key_value_heads));
  }
  if (c.head_dim % 2 != 0)
    return invalid_argument(fmt::format("model config: head_dim {} must be even for RoPE", c.head_dim));
  if (c.hidden_act != "silu" && c.hidden_act != "gelu_pytorch_tanh") {
    return unsupported(fmt::format(
        "model config: hidden_act \"{}\" is not supported (\"silu\", SwiGLU; \"gelu_pytorch_tanh\", GeGLU)",
        c.hidden_act));
  }
  if (!(c.partial_rotary_factor > 0 && c.partial_rotary_factor <= 1) || c.rotary_dim() % 2 != 0) {
    return invalid_argument(fmt::format(
        "model config: partial_rotary_factor {} must be in (0, 1] and give an even rotary dimension (head_dim {})",
        c.partial_rotary_factor, c.head_dim));
  }
  for (auto [key, value] : {std::pair{"query_pre_attn_scalar", c.query_pre_attn_scalar},
                            std::pair{"attn_logit_softcapping", c.attn_logit_softcapping},
                            std::pair{"final_logit_softcapping", c.final_logit_softcapping},
                            std::pair{"rope_local_base_freq", c.rope_local_base_freq}}) {
    if (value && !(*value > 0)) {
      return invalid_argument(fmt::format("model config: {} {} must be > 0 (or null)", key, *value));
    }
  }
  const std::string& t = c.rope_scaling.type;
  if (t != "default" && t != "linear" && t != "dynamic" && t != "llama3" && t != "longrope") {
    return unsupported(fmt::format(
        "model config: rope type \"{}\" is not supported (default, linear, dynamic, llama3, longrope)", t));
  }
  if (t == "longrope") {
    const size_t half = static_cast<size_t>(c.rotary_dim() / 2);
    if (c.rope_scaling.short_factor.size() != half || c.rope_scaling.long_factor.size() != half ||
        c.rope_scaling.original_max_position_embeddings <= 0) {
      return invalid_argument(fmt::format(
          "model config: longrope needs short_factor and long_factor of {} numbers each (rotary dimension / 2; got "
          "{} and {}) and original_max_position_embeddings > 0",
          half, c.rope_scaling.short_factor.size(), c.rope_scaling.long_factor.size()));
    }
  }
  if (t != "default" && !(c.rope_scaling.factor > 0)) {
    return invalid_argument(fmt::format("model config: rope factor {} must be > 0", c.rope_scaling.factor));
  }
  if (t == "llama3" && (c.rope_scaling.original_max_position_embeddings <= 0 ||
                        c.rope_scaling.high_freq_factor == c.rope_scaling.low_freq_factor)) {
    return invalid_argument(
        "model config: llama3 rope needs original_max_position_embeddings > 0 and "
        "high_freq_factor != low_freq_factor");
  }
  if (c.sliding_window && *c.sliding_window <= 0) {
    return invalid_argument(fmt::format("model config: sliding_window {} must be > 0", *c.sliding_window));
  }
  if (c.torch_dtype != "float32" && c.torch_dtype != "bfloat16" && c.torch_dtype != "float16") {
    return unsupported(
        fmt::format("model config: torch_dtype \"{}\" is not supported (float32, bfloat16, float16)", c.torch_dtype));
  }
  return {};
}

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& origin) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return invalid_argument(fmt::format("{}: not a JSON object; expected a Hugging Face config.json", origin));
  }
  ModelConfig c;
  TZ_RETURN_IF_ERROR(read_family(j, origin, c));
  KeyReader r(j, origin);
  r.integer("vocab_size", c.vocab_size, /*required=*/true);
  r.integer("hidden_size", c.hidden_size, true);
  r.integer("intermediate_size", c.intermediate_size, true);
  r.integer("num_hidden_layers", c.num_hidden_layers, true);
  r.integer("num_attention_heads", c.num_attention_heads, true);
  c.num_key_value_heads = c.num_attention_heads;
  r.integer("num_key_value_heads", c.num_key_value_heads);
  const std::string& type = c.model_type;
  if (type == "phi3") c.rms_norm_eps = 1e-5;
  r.number("rms_norm_eps", c.rms_norm_eps);
  c.max_position_embeddings = type == "llama"                         ? 2048
                              : type == "qwen2" || type == "qwen3"    ? 32768
                              : type == "phi3"                        ? 4096
                              : type == "gemma2"                      ? 8192
                              : type == "gemma3_text"                 ? 131072
                                                                      : 4096 * 32;
  r.integer("max_position_embeddings", c.max_position_embeddings);
  c.tie_word_embeddings = c.is_gemma();
  r.boolean("tie_word_embeddings", c.tie_word_embeddings);
  r.string("hidden_act", c.hidden_act);
  r.string("torch_dtype", c.torch_dtype);
  r.string("dtype", c.torch_dtype);
  r.number("initializer_range", c.initializer_range);
  // transformers' pad_token_id defaults: Gemma 0, Phi-3 32000, none elsewhere; JSON null: none.
  if (c.is_gemma()) c.pad_token_id = 0;
  if (type == "phi3") c.pad_token_id = 32000;
  if (j.contains("pad_token_id") && j["pad_token_id"].is_null()) c.pad_token_id.reset();
  if (r.has("pad_token_id")) {
    int64_t pad = 0;
    r.integer("pad_token_id", pad);
    c.pad_token_id = pad;
  }
  bool attention_bias = false;
  r.boolean("attention_bias", attention_bias);
  r.boolean("mlp_bias", c.mlp_bias);
  TZ_RETURN_IF_ERROR(r.status());
  if (c.num_attention_heads > 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  if (type == "qwen3") c.head_dim = 128;  // the config classes' defaults when the key is absent
  if (c.is_gemma()) c.head_dim = 256;
  r.integer("head_dim", c.head_dim);
  TZ_RETURN_IF_ERROR(r.status());
  const bool all_four_biased = type == "llama" || type == "qwen3" || c.is_gemma();
  c.qkv_bias = type == "qwen2" || (all_four_biased && attention_bias);
  c.o_proj_bias = all_four_biased && attention_bias;
  c.mlp_bias = type == "llama" && c.mlp_bias;
  c.qk_norm = type == "qwen3" || type == "gemma3_text";
  if (c.is_gemma()) TZ_RETURN_IF_ERROR(read_gemma(j, origin, c));
  TZ_RETURN_IF_ERROR(read_rope(j, origin, c));
  TZ_RETURN_IF_ERROR(read_sliding_window(j, origin, c));
  Status valid = validate_model_config(c);
  if (!valid.ok()) return valid.with_context(origin);
  return c;
}

namespace {

// `path` itself, or path/config.json when `path` is a directory.
std::string config_file(const std::string& path) {
  // POSIX stat, not std::filesystem: the torch wheel's libtorch.so exports broken copies of some
  // std::filesystem functions that the dynamic linker may bind instead of libstdc++'s.
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? path + "/config.json" : path;
}

}  // namespace

Result<std::string> read_model_config_text(const std::string& path) {
  const std::string file = config_file(path);
  std::ifstream in(file);
  if (!in) {
    return not_found(fmt::format("{}: cannot open; pass a Hugging Face model directory or its config.json", file));
  }
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<ModelConfig> load_model_config(const std::string& path) {
  TZ_ASSIGN_OR_RETURN(std::string text, read_model_config_text(path));
  return parse_model_config(text, config_file(path));
}

std::string to_hf_json(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["architectures"] = {c.architecture};
  j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["head_dim"] = c.head_dim;
  j[c.is_gemma() ? "hidden_activation" : "hidden_act"] = c.hidden_act;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_local_base_freq) j["rope_local_base_freq"] = *c.rope_local_base_freq;
  const RopeScaling& rope = c.rope_scaling;
  if (rope.type != "default" || rope.original_max_position_embeddings != 0) {
    j["rope_scaling"] = {{"rope_type", rope.type},
                         {"factor", rope.factor},
                         {"low_freq_factor", rope.low_freq_factor},
                         {"high_freq_factor", rope.high_freq_factor},
                         {"original_max_position_embeddings", rope.original_max_position_embeddings}};
    if (rope.type == "longrope") {
      j["rope_scaling"]["short_factor"] = rope.short_factor;
      j["rope_scaling"]["long_factor"] = rope.long_factor;
    }
    if (rope.attention_factor) j["rope_scaling"]["attention_factor"] = *rope.attention_factor;
  }
  if (c.model_type == "phi3") {
    j["original_max_position_embeddings"] = rope.original_max_position_embeddings;
    j["partial_rotary_factor"] = c.partial_rotary_factor;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (c.model_type == "llama" || c.model_type == "qwen3" || c.is_gemma()) j["attention_bias"] = c.qkv_bias;
  if (c.model_type == "llama") j["mlp_bias"] = c.mlp_bias;
  if (c.is_gemma()) {
    auto optional_number = [](const std::optional<double>& v) {
      return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json();
    };
    j["query_pre_attn_scalar"] = optional_number(c.query_pre_attn_scalar);
    j["attn_logit_softcapping"] = optional_number(c.attn_logit_softcapping);
    j["final_logit_softcapping"] = optional_number(c.final_logit_softcapping);
  }
  const bool qwen = c.model_type == "qwen2" || c.model_type == "qwen3";
  if (qwen) j["use_sliding_window"] = c.sliding_window.has_value();
  if ((qwen && c.sliding_window) || c.is_gemma()) {
    nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
    int64_t first_sliding = c.num_hidden_layers;
    for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
      layer_types.push_back(c.layer_uses_sliding_window(i) ? "sliding_attention" : "full_attention");
      if (c.layer_uses_sliding_window(i)) first_sliding = std::min(first_sliding, i);
    }
    if (qwen) j["max_window_layers"] = first_sliding;
    j["layer_types"] = layer_types;
  }
  if (c.model_type != "llama") {
    j["sliding_window"] = c.sliding_window ? nlohmann::ordered_json(*c.sliding_window) : nlohmann::ordered_json();
  }
  j["initializer_range"] = c.initializer_range;
  if (c.pad_token_id) {
    j["pad_token_id"] = *c.pad_token_id;
  } else if (c.is_gemma() || c.model_type == "phi3") {
    j["pad_token_id"] = nullptr;  // these families default to a pad token
  }
  j["torch_dtype"] = c.torch_dtype;
  return j.dump(2) + "\n";
}

ModelConfig tiny_llama_config() {
  ModelConfig c;
  c.vocab_size = 256;
  c.hidden_size = 128;
  c.intermediate_size = 384;
  c.num_hidden_layers = 4;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 32;
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5;
  c.sliding_window_layers.assign(c.num_hidden_layers, false);
  return c;
}

namespace {

// Weights of one decoder layer that take part in a matmul (biases and norms excluded).
int64_t layer_matmul_params(const ModelConfig& c) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  return c.hidden_size * (q + 2 * kv) + q * c.hidden_size + 3 * c.hidden_size * c.intermediate_size;
}

}  // namespace

int64_t num_parameters(const ModelConfig& c) {
  const int64_t q = c.num_attention_heads * c.head_dim, kv = c.num_key_value_heads * c.head_dim;
  // Norms: input and post-attention (Gemma: pre/post feed-forward too), q/k norms over head_dim.
  int64_t layer = layer_matmul_params(c) + (c.is_gemma() ? 4 : 2) * c.hidden_size + (c.qk_norm ? 2 * c.head_dim : 0);
  if (c.qkv_bias) layer += q + 2 * kv;
  if (c.o_proj_bias) layer += c.hidden_size;
  if (c.mlp_bias) layer += 2 * c.intermediate_size + c.hidden_size;
  const int64_t embedding = c.vocab_size * c.hidden_size;
  return embedding + c.num_hidden_layers * layer + c.hidden_size + (c.tie_word_embeddings ? 0 : embedding);
}

double training_flops_per_token(const ModelConfig& c, int64_t seq_len, bool weight_grads) {
  const double n_matmul = static_cast<double>(c.num_hidden_layers) * layer_matmul_params(c) +
                          static_cast<double>(c.vocab_size) * c.hidden_size;
  const double attention = 12.0 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * seq_len;
  return (weight_grads ? 6.0 : 4.0) * n_matmul + attention;
}

}  // namespace tierzero::engine
