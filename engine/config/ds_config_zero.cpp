// zero_optimization, offload_param and offload_optimizer (DeepSpeed's zero/config.py and
// zero/offload_config.py keys and defaults; nvme_path also as a list, a tierzero extension),
// "auto" bucket sizes as the Hugging Face integration resolves them, and the checks that tie them
// together.
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

Result<OffloadDevice> read_device(JsonFields& f) {
  std::string name = "none";
  TZ_RETURN_IF_ERROR(f.read_string("device", &name));
  if (name == "none") return OffloadDevice::kNone;
  if (name == "cpu") return OffloadDevice::kCpu;
  if (name == "nvme") return OffloadDevice::kNvme;
  return invalid_argument(f.path_of("device") + " must be \"none\", \"cpu\" or \"nvme\", got \"" + name + "\"");
}

// `path` spelled one way: "/a/./b/" and "/a/b" are the same directory.
std::filesystem::path normal_directory(const std::string& path) {
  std::filesystem::path normal = std::filesystem::path(path).lexically_normal();
  return normal.has_filename() || normal == normal.root_path() ? normal : normal.parent_path();
}

// nvme_path: one directory (DeepSpeed's form) or a list of distinct ones to stripe over (a tierzero
// extension). Absent, null, "auto" or "": no path.
Status read_nvme_paths(JsonFields& f, std::vector<std::string>* out) {
  const nlohmann::json& value = f.raw("nvme_path");
  if (value.is_null() || f.is_auto("nvme_path")) return {};
  const std::string key = f.path_of("nvme_path");
  if (value.is_string()) {
    if (!value.get<std::string>().empty()) *out = {value.get<std::string>()};
    return {};
  }
  if (!value.is_array())
    return invalid_argument(key + " must be a directory (a string) or a list of directories, got " + value.dump());
  if (value.empty())
    return invalid_argument(key + " is an empty list: give a directory, or several on different drives to stripe over");
  std::vector<std::string> paths;
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string entry = key + "[" + std::to_string(i) + "]";
    if (!value[i].is_string() || value[i].get<std::string>().empty())
      return invalid_argument(entry + " must be a directory (a non-empty string), got " + value[i].dump());
    const std::string path = value[i].get<std::string>();
    for (size_t j = 0; j < paths.size(); ++j)
      if (normal_directory(paths[j]) == normal_directory(path))
        return invalid_argument(entry + " \"" + path + "\" repeats " + key + "[" + std::to_string(j) +
                                "]: each directory may appear once (one swap file each)");
    paths.push_back(path);
  }
  *out = std::move(paths);
  return {};
}

Status require_nvme_path(JsonFields& f, OffloadDevice device, const std::vector<std::string>& nvme_paths) {
  if (device != OffloadDevice::kNvme || !nvme_paths.empty()) return {};
  return invalid_argument(f.path_of("nvme_path") + " is required when " + f.path_of("device") +
                          " is \"nvme\": give a directory on a fast local drive");
}

Status parse_offload_param(JsonFields& zero, OffloadParamConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields f, zero.child("offload_param"));
  TZ_ASSIGN_OR_RETURN(out->device, read_device(f));
  TZ_RETURN_IF_ERROR(read_nvme_paths(f, &out->nvme_paths));
  TZ_RETURN_IF_ERROR(f.read_int("buffer_count", &out->buffer_count, 1));
  TZ_RETURN_IF_ERROR(f.read_count("buffer_size", &out->buffer_size, true));
  TZ_RETURN_IF_ERROR(f.read_count("max_in_cpu", &out->max_in_cpu, false));
  TZ_RETURN_IF_ERROR(f.read_bool("pin_memory", &out->pin_memory));
  TZ_RETURN_IF_ERROR(require_nvme_path(f, out->device, out->nvme_paths));
  TZ_RETURN_IF_ERROR(f.check_unused(warnings));
  return {};
}

Status parse_offload_optimizer(JsonFields& zero, OffloadOptimizerConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields f, zero.child("offload_optimizer"));
  TZ_ASSIGN_OR_RETURN(out->device, read_device(f));
  TZ_RETURN_IF_ERROR(read_nvme_paths(f, &out->nvme_paths));
  TZ_RETURN_IF_ERROR(f.read_int("buffer_count", &out->buffer_count, 1));
  TZ_RETURN_IF_ERROR(f.read_bool("pin_memory", &out->pin_memory));
  TZ_RETURN_IF_ERROR(f.read_bool("pipeline_read", &out->pipeline_read));
  TZ_RETURN_IF_ERROR(f.read_bool("pipeline_write", &out->pipeline_write));
  TZ_RETURN_IF_ERROR(f.read_double("ratio", &out->ratio, 0.0, 1.0));
  TZ_RETURN_IF_ERROR(require_nvme_path(f, out->device, out->nvme_paths));
  TZ_RETURN_IF_ERROR(f.check_unused(warnings));
  return {};
}

// A count that may be "auto" (`auto_value` from the model's hidden size h, as transformers'
// HfTrainerDeepSpeedConfig fills it; refused when h is unknown), under `key`.
Status read_auto_count(JsonFields& f, const std::string& key, const ResolveHints& hints, uint64_t* out,
                       bool positive, uint64_t (*auto_value)(uint64_t h)) {
  if (!f.is_auto(key)) return f.read_count(key, out, positive);
  if (hints.model.hidden_size <= 0) {
    return invalid_argument(f.path_of(key) +
                            " is \"auto\", which comes from the model's hidden_size, not known here: give a number");
  }
  *out = auto_value(static_cast<uint64_t>(hints.model.hidden_size));
  return {};
}

// DeepSpeed reads each stage3_* knob under its field name too (pydantic alias).
Status read_stage3_count(JsonFields& f, const std::string& name, const ResolveHints& hints, uint64_t* out,
                         bool positive, uint64_t (*auto_value)(uint64_t h) = nullptr) {
  const std::string prefixed = "stage3_" + name;
  if (f.has(prefixed) && f.has(name)) {
    return invalid_argument(f.path_of(prefixed) + " and " + f.path_of(name) + " are the same setting; give one");
  }
  const std::string key = f.has(name) ? name : prefixed;
  if (auto_value == nullptr) return f.read_count(key, out, positive);
  return read_auto_count(f, key, hints, out, positive, auto_value);
}

// The deprecated booleans DeepSpeed still maps: cpu_offload -> offload_optimizer.device "cpu",
// cpu_offload_param -> offload_param.device "cpu", cpu_offload_use_pin_memory -> pin_memory.
Status apply_deprecated(JsonFields& f, ZeroConfig* out, Warnings* warnings) {
  bool flag = false;
  if (f.has("cpu_offload")) {
    TZ_RETURN_IF_ERROR(f.read_bool("cpu_offload", &flag));
    if (flag && out->offload_optimizer.device == OffloadDevice::kNone)
      out->offload_optimizer.device = OffloadDevice::kCpu;
    warnings->push_back(f.path_of("cpu_offload") + " is deprecated: use zero_optimization.offload_optimizer");
  }
  if (f.has("cpu_offload_param")) {
    flag = false;
    TZ_RETURN_IF_ERROR(f.read_bool("cpu_offload_param", &flag));
    if (flag && out->offload_param.device == OffloadDevice::kNone) out->offload_param.device = OffloadDevice::kCpu;
    warnings->push_back(f.path_of("cpu_offload_param") + " is deprecated: use zero_optimization.offload_param");
  }
  if (f.has("cpu_offload_use_pin_memory")) {
    flag = false;
    TZ_RETURN_IF_ERROR(f.read_bool("cpu_offload_use_pin_memory", &flag));
    out->offload_param.pin_memory = out->offload_param.pin_memory || flag;
    out->offload_optimizer.pin_memory = out->offload_optimizer.pin_memory || flag;
    warnings->push_back(f.path_of("cpu_offload_use_pin_memory") +
                        " is deprecated: use pin_memory in the offload blocks");
  }
  return {};
}

Status check_offload_stage(JsonFields& f, const ZeroConfig& z) {
  if (z.offload_param.device != OffloadDevice::kNone && z.stage != 3) {
    return invalid_argument(f.path_of("offload_param") + " needs zero_optimization.stage 3 (stage is " +
                            std::to_string(z.stage) +
                            "): parameters are partitioned only in stage 3; set stage 3 or "
                            "remove offload_param");
  }
  if (z.offload_optimizer.device != OffloadDevice::kNone && z.stage == 0) {
    return invalid_argument(f.path_of("offload_optimizer") +
                            " needs zero_optimization.stage 1, 2 or 3 (stage is 0): set a stage or remove it");
  }
  if (z.offload_optimizer.ratio < 1.0 && z.stage != 3) {
    return invalid_argument(f.path_of("offload_optimizer.ratio") + " < 1 (partial offload) needs stage 3");
  }
  return {};
}

}  // namespace

Status parse_zero(JsonFields& root, const ResolveHints& hints, ZeroConfig* out, Warnings* warnings) {
  if (root.raw("zero_optimization").is_boolean()) {
    // DeepSpeed's oldest form: "zero_optimization": true means stage 1.
    out->stage = root.raw("zero_optimization").get<bool>() ? 1 : 0;
    warnings->push_back("zero_optimization as a boolean is deprecated: write {\"stage\": N}");
    return {};
  }
  TZ_ASSIGN_OR_RETURN(JsonFields f, root.child("zero_optimization"));
  TZ_RETURN_IF_ERROR(f.read_int("stage", &out->stage, 0, 3));
  TZ_RETURN_IF_ERROR(f.read_bool("contiguous_gradients", &out->contiguous_gradients));
  TZ_RETURN_IF_ERROR(f.read_bool("reduce_scatter", &out->reduce_scatter));
  TZ_RETURN_IF_ERROR(f.read_bool("allgather_partitions", &out->allgather_partitions));
  out->overlap_comm = out->stage == 3;
  TZ_RETURN_IF_ERROR(f.read_bool("overlap_comm", &out->overlap_comm));
  TZ_RETURN_IF_ERROR(f.read_bool("round_robin_gradients", &out->round_robin_gradients));
  TZ_RETURN_IF_ERROR(read_auto_count(f, "reduce_bucket_size", hints, &out->reduce_bucket_size, true,
                                     [](uint64_t h) { return h * h; }));
  TZ_RETURN_IF_ERROR(f.read_count("allgather_bucket_size", &out->allgather_bucket_size, true));
  TZ_RETURN_IF_ERROR(f.read_count("sub_group_size", &out->sub_group_size, true));
  TZ_RETURN_IF_ERROR(read_stage3_count(f, "prefetch_bucket_size", hints, &out->prefetch_bucket_size, true,
                                       [](uint64_t h) { return static_cast<uint64_t>(0.9 * static_cast<double>(h * h)); }));
  TZ_RETURN_IF_ERROR(read_stage3_count(f, "param_persistence_threshold", hints, &out->param_persistence_threshold,
                                       false, [](uint64_t h) { return 10 * h; }));
  TZ_RETURN_IF_ERROR(read_stage3_count(f, "max_live_parameters", hints, &out->max_live_parameters, false));
  TZ_RETURN_IF_ERROR(read_stage3_count(f, "max_reuse_distance", hints, &out->max_reuse_distance, false));
  for (const char* key : {"stage3_gather_16bit_weights_on_model_save", "gather_16bit_weights_on_model_save",
                          "stage3_gather_fp16_weights_on_model_save"}) {
    TZ_RETURN_IF_ERROR(f.read_bool(key, &out->gather_16bit_weights_on_model_save));
  }
  TZ_RETURN_IF_ERROR(parse_offload_param(f, &out->offload_param, warnings));
  TZ_RETURN_IF_ERROR(parse_offload_optimizer(f, &out->offload_optimizer, warnings));
  TZ_RETURN_IF_ERROR(apply_deprecated(f, out, warnings));
  TZ_RETURN_IF_ERROR(check_offload_stage(f, *out));
  TZ_RETURN_IF_ERROR(f.check_unused(warnings));
  return {};
}

}  // namespace tierzero::engine::detail
