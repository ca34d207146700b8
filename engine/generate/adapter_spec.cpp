// read_adapter_spec (internal/decoding_model.h): a PEFT adapter_config.json as LoRA settings.
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/generate/internal/decoding_model.h"

namespace tierzero::engine {
namespace {

// A key of adapter_config.json as T, or kInvalidArgument naming the file, key and expected type.
template <typename T>
Result<T> typed(const std::string& path, const nlohmann::json& config, const char* key, const char* type) {
  try {
    return config.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    return invalid_argument(fmt::format("{}: \"{}\" must be {}, got {}", path, key, type, config.at(key).dump()));
  }
}

// True when `key` is absent, null, false or empty (a PEFT default that changes nothing).
bool unset(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  return it == config.end() || it->is_null() || (it->is_boolean() && !it->get<bool>()) ||
         ((it->is_object() || it->is_array()) && it->empty());
}

}  // namespace

Result<LoraSpec> read_adapter_spec(const std::string& dir) {
  const std::string path = dir + "/adapter_config.json";
  std::ifstream in(path);
  if (!in)
    return not_found(
        fmt::format("{}: cannot be read; --adapter takes a PEFT LoRA adapter directory "
                    "(adapter_config.json + adapter_model.safetensors, as `tierzero train` writes "
                    "for a LoRA run and PEFT's save_pretrained)",
                    path));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return corrupt(path + ": not a JSON object");
  const std::string peft_type = config.value("peft_type", std::string("LORA"));
  if (peft_type != "LORA")
    return invalid_argument(
        fmt::format("{}: peft_type \"{}\": only LoRA adapters (\"LORA\") are applied", path, peft_type));
  for (const char* key : {"r", "lora_alpha", "target_modules"})
    if (!config.contains(key))
      return invalid_argument(fmt::format("{}: no \"{}\" (PEFT's LoraConfig writes it)", path, key));
  if (config.value("bias", std::string("none")) != "none")
    return invalid_argument(path + ": \"bias\" " + config["bias"].dump() +
                            ": adapters with trained biases are not applied; only bias \"none\" is");
  // PEFT's LoraConfig keys that change what the adapter computes or where it applies, beyond plain LoRA.
  for (const char* key : {"modules_to_save", "fan_in_fan_out", "use_dora", "rank_pattern", "alpha_pattern",
                          "layers_to_transform", "exclude_modules", "target_parameters", "trainable_token_indices",
                          "layer_replication", "lora_bias", "use_qalora", "use_bdlora", "alora_invocation_tokens"}) {
    if (!unset(config, key))
      return invalid_argument(
          fmt::format("{}: \"{}\" is {}; tierzero applies plain LoRA adapters only (leave it "
                      "unset, or merge the adapter with PEFT's merge_and_unload and pass the "
                      "merged model as --model)",
                      path, key, config[key].dump()));
  }
  LoraSpec spec;
  TZ_ASSIGN_OR_RETURN(spec.r, typed<int64_t>(path, config, "r", "a whole number"));
  TZ_ASSIGN_OR_RETURN(spec.lora_alpha, typed<double>(path, config, "lora_alpha", "a number"));
  if (config.contains("use_rslora")) {
    TZ_ASSIGN_OR_RETURN(spec.use_rslora, typed<bool>(path, config, "use_rslora", "true or false"));
  }
  const nlohmann::json& targets = config["target_modules"];
  if (targets.is_string()) {
    spec.target_pattern = targets.get<std::string>();
  } else {
    TZ_ASSIGN_OR_RETURN(spec.target_modules, typed<std::vector<std::string>>(path, config, "target_modules",
                                                                             "a list of module names or a string"));
  }
  spec.dropout = 0.0;  // inference: PEFT's eval mode drops nothing
  return spec;
}

}  // namespace tierzero::engine
