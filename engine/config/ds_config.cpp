#include "engine/config/ds_config.h"

#include <fstream>
#include <sstream>

#include "engine/config/internal/ds_config_sections.h"
#include "engine/config/internal/flag_values.h"

namespace tierzero::engine {

const char* offload_device_name(OffloadDevice device) {
  switch (device) {
    case OffloadDevice::kNone: return "none";
    case OffloadDevice::kCpu: return "cpu";
    case OffloadDevice::kNvme: return "nvme";
  }
  return "?";
}

const char* offload_grad_accumulator_name(OffloadGradAccumulator accumulator) {
  switch (accumulator) {
    case OffloadGradAccumulator::kAuto: return "auto";
    case OffloadGradAccumulator::kDevice: return "device";
    case OffloadGradAccumulator::kHost: return "host";
  }
  return "?";
}

const char* optimizer_state_dtype_name(OptimizerStateDtype dtype) {
  switch (dtype) {
    case OptimizerStateDtype::kFp32: return "fp32";
    case OptimizerStateDtype::kBf16: return "bf16";
    case OptimizerStateDtype::kInt8: return "int8";
  }
  return "?";
}

const char* master_weights_name(MasterWeights master) { return master == MasterWeights::kFp32 ? "fp32" : "compact"; }

const char* optimizer_type_name(OptimizerType type) { return type == OptimizerType::kAdam ? "Adam" : "AdamW"; }

Precision DsConfig::precision() const {
  if (fp16.enabled) return Precision::kFp16;
  if (bf16.enabled) return Precision::kBf16;
  return Precision::kFp32;
}

LossScalerConfig DsConfig::loss_scaler_config() const {
  return fp16.enabled ? fp16.loss_scaler : LossScalerConfig::unit();
}

bool DsConfig::param_shard_on_nvme() const { return zero.offload_param.device == OffloadDevice::kNvme && !tierzero.lora; }

Result<DsConfig> parse_ds_config(const nlohmann::json& json, const ResolveHints& hints) {
  if (!json.is_object()) return invalid_argument("a ds_config must be a JSON object ({...}), got " + json.dump());
  using namespace detail;
  DsConfig c;
  TZ_RETURN_IF_ERROR(check_unresolved_autos(json, hints));
  TZ_ASSIGN_OR_RETURN(const IgnoredKeys ignored, read_ignored_keys(json));
  JsonFields root(&json, "", &ignored);
  const TrainerFlags& flags = hints.flags;
  TZ_RETURN_IF_ERROR(parse_batch(root, hints, &c.batch));
  TZ_RETURN_IF_ERROR(parse_precision(root, flags, &c.fp16, &c.bf16, &c.warnings));
  TZ_RETURN_IF_ERROR(parse_zero(root, hints, &c.zero, &c.warnings));
  TZ_RETURN_IF_ERROR(parse_aio(root, &c.aio, &c.warnings));
  TZ_RETURN_IF_ERROR(parse_optimizer(root, hints, &c.optimizer, &c.optimizer_from_flags, &c.warnings));
  TZ_RETURN_IF_ERROR(parse_scheduler(root, hints, c.optimizer, c.optimizer_from_flags, &c.scheduler, &c.warnings));
  TZ_RETURN_IF_ERROR(parse_activation_checkpointing(root, &c.activation_checkpointing, &c.warnings));
  TZ_RETURN_IF_ERROR(parse_tierzero(root, flags, &c.tierzero, &c.warnings));
  TZ_RETURN_IF_ERROR(check_state_layout(c));
  TZ_RETURN_IF_ERROR(resolve_double(root, "gradient_clipping", flags.max_grad_norm, "--max-grad-norm",
                                    &c.gradient_clipping, 0.0, 1e30));
  TZ_RETURN_IF_ERROR(root.read_int("steps_per_print", &c.steps_per_print, 1));
  TZ_RETURN_IF_ERROR(root.read_bool("wall_clock_breakdown", &c.wall_clock_breakdown));
  TZ_RETURN_IF_ERROR(root.check_unused(&c.warnings));
  warn_ineffective_keys(json, &c.warnings);
  return c;
}

Result<DsConfig> parse_ds_config_text(std::string_view text, const ResolveHints& hints) {
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number like 5e999
    // what() is "[json.exception.parse_error.101] parse error at line 2, column 3: ...": keep the words.
    std::string what = e.what();
    if (what.starts_with("[json.exception.")) what.erase(0, what.find("] ") + 2);
    return invalid_argument("ds_config is not valid JSON: " + what);
  }
  TZ_RETURN_IF_ERROR(detail::check_duplicate_keys(text));
  return parse_ds_config(json, hints);
}

Result<DsConfig> load_ds_config(const std::string& path, const ResolveHints& hints) {
  std::ifstream in(path);
  if (!in) return not_found("cannot open ds_config " + path + ": check the path");
  std::stringstream text;
  text << in.rdbuf();
  Result<DsConfig> config = parse_ds_config_text(text.str(), hints);
  if (!config.ok()) return config.status().with_context(path);
  return config;
}

std::string resolved_config_text(const DsConfig& config) { return to_json(config).dump(2); }

}  // namespace tierzero::engine
