// The adapters' values and PEFT's files (functional_model.h, LoRA): PEFT's initialisation, the adapter
// directory read and written, and the merged weights.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors/safetensors.h"
#include "engine/model/internal/load_safetensors.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine {
namespace {

constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";
// PEFT's prefix of a saved adapter's tensor names (PeftModel -> LoraModel -> the base model).
constexpr std::string_view kPeftPrefix = "base_model.model.";

Result<nlohmann::json> read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return not_found(path + ": cannot be read (a PEFT adapter directory holds " + kConfigFile + ")");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return corrupt(path + ": not a JSON object");
  return json;
}

// The adapter directory's r, lora_alpha and use_rslora against the model's.
Status check_adapter_config(const std::string& path, const nlohmann::json& config, const LoraSpec& spec) {
  const int64_t r = config.value("r", int64_t{-1});
  const double alpha = config.value("lora_alpha", -1.0);
  const bool rslora = config.value("use_rslora", false);
  if (r != spec.r || alpha != spec.lora_alpha || rslora != spec.use_rslora)
    return invalid_argument(fmt::format(
        "{}: r {}, lora_alpha {}, use_rslora {} differ from tierzero.lora's r {}, lora_alpha {}, use_rslora {}; "
        "set tierzero.lora to the adapter's values",
        path, r, alpha, rslora, spec.r, spec.lora_alpha, spec.use_rslora));
  return {};
}

Status write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return errno_status(errno, path + ": cannot be written");
  return {};
}

}  // namespace

std::map<std::string, at::Tensor> init_lora_adapters(const LoraModel& model, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> adapters;
  for (const LoraTarget& t : model.targets()) {
    // kaiming_uniform_(a=sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in).
    const double bound = 1.0 / std::sqrt(static_cast<double>(t.in_features));
    adapters[t.a_name()] = at::empty({model.spec().r, t.in_features}, at::kFloat).uniform_(-bound, bound, generator);
    adapters[t.b_name()] = at::zeros({t.out_features, model.spec().r}, at::kFloat);
  }
  return adapters;
}

Result<std::map<std::string, at::Tensor>> load_peft_adapter(const std::string& dir, const LoraModel& model) {
  const std::string config_path = dir + "/" + kConfigFile;
  TZ_ASSIGN_OR_RETURN(const nlohmann::json config, read_json_file(config_path));
  TZ_RETURN_IF_ERROR(check_adapter_config(config_path, config, model.spec()));
  const std::string weights_path = dir + "/" + kWeightsFile;
  TZ_ASSIGN_OR_RETURN(auto stored, load_safetensors_file(weights_path, at::kFloat, at::kCPU));
  std::map<std::string, at::Tensor> adapters;
  for (auto& [name, tensor] : stored) {
    if (!name.starts_with(kPeftPrefix))
      return invalid_argument(fmt::format("{}: tensor {} is not a PEFT adapter's (\"{}<module>.lora_A.weight\")",
                                          weights_path, name, kPeftPrefix));
    adapters[name.substr(kPeftPrefix.size())] = std::move(tensor);
  }
  for (const ParamSpec& spec : all_params(model)) {
    auto it = adapters.find(spec.name);
    if (it == adapters.end())
      return invalid_argument(fmt::format("{}: no tensor {}{} for a target of tierzero.lora.target_modules",
                                          weights_path, kPeftPrefix, spec.name));
    if (it->second.sizes().vec() != spec.shape)
      return invalid_argument(fmt::format("{}: {}{} has shape [{}], expected [{}]", weights_path, kPeftPrefix,
                                          spec.name, fmt::join(it->second.sizes(), ","), fmt::join(spec.shape, ",")));
  }
  if (adapters.size() != all_params(model).size())
    return invalid_argument(fmt::format("{}: holds {} adapter tensors, tierzero.lora.target_modules makes {}; set "
                                        "target_modules to the adapter's ({})",
                                        weights_path, adapters.size(), all_params(model).size(),
                                        config.value("target_modules", nlohmann::json()).dump()));
  return adapters;
}

Status save_peft_adapter(const std::string& dir, const LoraModel& model,
                         const std::map<std::string, at::Tensor>& adapters, const std::string& base_model) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return invalid_argument(dir + ": cannot create the adapter directory: " + error.message());
  const LoraSpec& spec = model.spec();
  nlohmann::json targets = spec.target_pattern.empty() ? nlohmann::json(spec.target_modules)
                                                       : nlohmann::json(spec.target_pattern);
  const nlohmann::json config = {{"peft_type", "LORA"},
                                 {"task_type", "CAUSAL_LM"},
                                 {"base_model_name_or_path", base_model},
                                 {"r", spec.r},
                                 {"lora_alpha", spec.lora_alpha},
                                 {"lora_dropout", spec.dropout},
                                 {"use_rslora", spec.use_rslora},
                                 {"bias", "none"},
                                 {"target_modules", targets},
                                 {"fan_in_fan_out", false},
                                 {"inference_mode", true},
                                 {"init_lora_weights", true},
                                 {"modules_to_save", nullptr}};
  TZ_RETURN_IF_ERROR(write_file(dir + "/" + kConfigFile, config.dump(2) + "\n"));

  std::vector<checkpoint::TensorToWrite> declared;
  std::vector<at::Tensor> data;
  for (const ParamSpec& spec_i : all_params(model)) {
    auto it = adapters.find(spec_i.name);
    if (it == adapters.end()) return invalid_argument("save_peft_adapter: no values for " + spec_i.name);
    declared.push_back({std::string(kPeftPrefix) + spec_i.name, ElementType::kF32, spec_i.shape});
    data.push_back(it->second.detach().to(at::kCPU, at::kFloat).contiguous());
  }
  TZ_ASSIGN_OR_RETURN(const std::string header, checkpoint::build_safetensors_header(declared, {{"format", "pt"}}));
  std::string bytes(8, '\0');
  const uint64_t header_size = header.size();
  std::memcpy(bytes.data(), &header_size, sizeof header_size);  // little-endian hosts only, as the reader
  bytes += header;
  for (const at::Tensor& t : data) bytes.append(static_cast<const char*>(t.const_data_ptr()), t.nbytes());
  return write_file(dir + "/" + kWeightsFile, bytes);
}

std::optional<at::Tensor> merged_rows(const LoraModel& model, const std::map<std::string, at::Tensor>& adapters,
                                      const std::string& name, const at::Tensor& base_rows, int64_t first_row) {
  for (const LoraTarget& t : model.targets()) {
    if (t.module + ".weight" != name) continue;
    const at::Tensor a = adapters.at(t.a_name()).to(at::kFloat);
    const at::Tensor b = adapters.at(t.b_name()).to(at::kFloat).narrow(0, first_row, base_rows.size(0));
    return base_rows.to(at::kFloat) + at::matmul(b, a) * model.spec().scaling();
  }
  return std::nullopt;
}

}  // namespace tierzero::engine
