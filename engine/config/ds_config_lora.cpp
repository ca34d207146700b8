// tierzero.lora: LoRA adapters over a frozen base, with PEFT LoraConfig's keys (table in
// configs/README.md). Values PEFT accepts but tierzero does not implement are refused by name.
#include <regex>
#include <string>
#include <vector>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

// target_modules: a non-empty list of module names, or one string ("all-linear" or a regex).
Status read_target_modules(JsonFields& l, LoraConfig* out) {
  const nlohmann::json& value = l.raw("target_modules");
  if (value.is_null()) return {};
  if (value.is_string()) {
    const std::string pattern = value.get<std::string>();
    if (pattern.empty()) return invalid_argument(l.path_of("target_modules") + " must not be empty");
    if (pattern != "all-linear") {
      try {
        std::regex check(pattern);
      } catch (const std::regex_error& e) {
        return invalid_argument(l.path_of("target_modules") + " \"" + pattern +
                                "\" is neither \"all-linear\" nor a valid regular expression (" + e.what() +
                                "); give a list of module names, e.g. [\"q_proj\", \"v_proj\"]");
      }
    }
    out->target_modules.clear();
    out->target_pattern = pattern;
    return {};
  }
  if (!value.is_array() || value.empty())
    return invalid_argument(l.path_of("target_modules") +
                            " must be a non-empty list of module names (e.g. [\"q_proj\", \"v_proj\"]), "
                            "\"all-linear\" or a regular expression, got " +
                            value.dump());
  out->target_modules.clear();
  for (const nlohmann::json& name : value) {
    if (!name.is_string() || name.get<std::string>().empty())
      return invalid_argument(l.path_of("target_modules") + " entries must be module names such as \"q_proj\", got " +
                              name.dump());
    out->target_modules.push_back(name.get<std::string>());
  }
  return {};
}

}  // namespace

Status parse_lora(JsonFields& t, std::optional<LoraConfig>* out, Warnings* warnings) {
  if (!t.has("lora")) return {};
  TZ_ASSIGN_OR_RETURN(JsonFields l, t.child("lora"));
  LoraConfig lora;
  TZ_RETURN_IF_ERROR(l.read_int("r", &lora.r, 1, 65536));
  TZ_RETURN_IF_ERROR(l.read_double("lora_alpha", &lora.lora_alpha, 0.0, 1e9));
  if (lora.lora_alpha <= 0.0) return invalid_argument(l.path_of("lora_alpha") + " must be > 0");
  TZ_RETURN_IF_ERROR(l.read_double("lora_dropout", &lora.lora_dropout, 0.0, 1.0));
  if (lora.lora_dropout >= 1.0)
    return invalid_argument(l.path_of("lora_dropout") + " " + l.raw("lora_dropout").dump() +
                            " would drop every input of the adapters (they would never train); use a value in "
                            "[0, 1), e.g. 0.05");
  TZ_RETURN_IF_ERROR(read_target_modules(l, &lora));
  TZ_RETURN_IF_ERROR(l.read_string("bias", &lora.bias));
  if (lora.bias != "none") {
    if (lora.bias == "all" || lora.bias == "lora_only")
      return invalid_argument(l.path_of("bias") + " \"" + lora.bias +
                              "\" (training biases) is not supported yet; set \"none\" (PEFT's default)");
    return invalid_argument(l.path_of("bias") + " must be \"none\", \"all\" or \"lora_only\" (PEFT's values), got \"" +
                            lora.bias + "\"");
  }
  TZ_RETURN_IF_ERROR(l.read_bool("use_rslora", &lora.use_rslora));
  TZ_RETURN_IF_ERROR(l.read_string("init_adapter", &lora.init_adapter));
  TZ_RETURN_IF_ERROR(l.check_unused(warnings));
  *out = std::move(lora);
  return {};
}

nlohmann::json lora_json(const LoraConfig& lora) {
  nlohmann::json targets = lora.target_pattern.empty() ? nlohmann::json(lora.target_modules)
                                                       : nlohmann::json(lora.target_pattern);
  return {{"r", lora.r},
          {"lora_alpha", lora.lora_alpha},
          {"lora_dropout", lora.lora_dropout},
          {"target_modules", targets},
          {"bias", lora.bias},
          {"use_rslora", lora.use_rslora},
          {"init_adapter", lora.init_adapter.empty() ? nlohmann::json(nullptr) : nlohmann::json(lora.init_adapter)}};
}

}  // namespace tierzero::engine::detail

namespace tierzero::engine {

bool lora_targets_module(const std::vector<std::string>& target_modules, const std::string& target_pattern,
                         const std::string& module_path) {
  if (target_pattern == "all-linear") return true;
  if (!target_pattern.empty()) {
    try {
      return std::regex_match(module_path, std::regex(target_pattern));
    } catch (const std::regex_error&) {
      return false;
    }
  }
  for (const std::string& name : target_modules) {
    if (module_path == name || module_path.ends_with("." + name)) return true;
  }
  return false;
}

}  // namespace tierzero::engine
