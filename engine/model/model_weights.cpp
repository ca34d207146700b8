// The parameter store: HF-style random init, and loading a HF checkpoint directory.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "checkpoint/safetensors/safetensors.h"
#include "engine/model/functional_model.h"
#include "engine/model/internal/init_value.h"
#include "engine/model/internal/load_safetensors.h"

namespace tierzero::engine {
namespace {

// POSIX stat, not std::filesystem: see load_model_config.
bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The shard files of model.safetensors.index.json at `index_path`, and the names it promises.
Status read_index(const std::string& index_path, std::set<std::string>& files, std::set<std::string>& names) {
  std::ifstream in(index_path);
  if (!in) return io_error(fmt::format("{}: cannot open", index_path));
  nlohmann::json index = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return corrupt(fmt::format("{}: expected a JSON object with a \"weight_map\" object {{name: file}}", index_path));
  }
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) return corrupt(fmt::format("{}: weight_map[\"{}\"] must be a file name", index_path, name));
    const std::string file_name = file.get<std::string>();
    if (file_name.find('/') != std::string::npos) {
      return corrupt(fmt::format("{}: weight_map[\"{}\"] = \"{}\" must be a file in the same directory", index_path,
                                 name, file_name));
    }
    files.insert(file_name);
    names.insert(name);
  }
  return {};
}

}  // namespace

Result<std::map<std::string, at::Tensor>> load_safetensors_file(const std::string& path,
                                                                std::optional<at::ScalarType> dtype,
                                                                at::Device device) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::SafetensorsFile> file, checkpoint::SafetensorsFile::open(path));
  std::map<std::string, at::Tensor> out;
  for (const checkpoint::SafetensorsTensorInfo& t : file->header().tensors) {
    const std::optional<at::ScalarType> file_dtype = to_scalar_type(t.dtype);
    if (!file_dtype) {
      return unsupported(fmt::format("{}: tensor {} has dtype {}, which tierzero does not load as a model weight", path,
                                     t.name, checkpoint::dtype_name(t.dtype)));
    }
    // from_blob views the mapping; .to(..., copy=true) makes an owning copy before it is unmapped.
    auto* bytes = const_cast<std::byte*>(file->data(t).data());
    at::Tensor view = at::from_blob(bytes, t.shape, at::TensorOptions().dtype(*file_dtype));
    out[t.name] = view.to(device, dtype.value_or(*file_dtype), /*non_blocking=*/false, /*copy=*/true);
  }
  return out;
}

std::map<std::string, at::Tensor> init_parameters(const ModelConfig& config, uint64_t seed, at::ScalarType dtype,
                                                  at::Device device) {
  std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::map<std::string, at::Tensor> params;
  for (const ParamSpec& spec : all_params(*model)) params[spec.name] = init_value(spec, config, generator).to(device, dtype);
  return params;
}

bool init_value_draws(const ParamSpec& spec) {
  return !ends_with(spec.name, "norm.weight") && !ends_with(spec.name, ".bias");
}

at::Tensor init_value(const ParamSpec& spec, const ModelConfig& config, at::Generator& generator) {
  at::Tensor value;
  if (ends_with(spec.name, "norm.weight")) {
    // Gemma's norms scale by (1 + weight): HF starts their weights at 0.
    value = config.is_gemma() ? at::zeros(spec.shape, at::kFloat) : at::ones(spec.shape, at::kFloat);
  } else if (ends_with(spec.name, ".bias")) {
    value = at::zeros(spec.shape, at::kFloat);
  } else {
    value = at::empty(spec.shape, at::kFloat).normal_(0.0, config.initializer_range, generator);
  }
  if (spec.name == "model.embed_tokens.weight" && config.pad_token_id && *config.pad_token_id >= 0 &&
      *config.pad_token_id < config.vocab_size) {
    value[*config.pad_token_id].zero_();
  }
  return value;
}

Result<std::map<std::string, at::Tensor>> load_hf_weights(const std::string& dir, at::ScalarType dtype,
                                                          at::Device device) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  const std::string single_path = dir + "/model.safetensors";
  if (file_exists(index_path)) {
    std::set<std::string> files, names;
    std::map<std::string, at::Tensor> params;
    TZ_RETURN_IF_ERROR(read_index(index_path, files, names));
    for (const std::string& file : files) {
      Result<std::map<std::string, at::Tensor>> shard = load_safetensors_file(dir + "/" + file, dtype, device);
      if (!shard.ok()) return shard.status().with_context(fmt::format("shard listed in {}", index_path));
      params.merge(shard.value());
    }
    for (const std::string& name : names) {
      if (!params.count(name)) {
        return corrupt(
            fmt::format("{}: tensor {} is listed in weight_map but absent from its shard", index_path, name));
      }
    }
    return params;
  }
  if (file_exists(single_path)) {
    return load_safetensors_file(single_path, dtype, device);
  }
  return not_found(
      fmt::format("{}: neither model.safetensors nor model.safetensors.index.json exists; pass a "
                  "Hugging Face model directory saved with safe_serialization=True",
                  dir));
}

}  // namespace tierzero::engine
