// The files beside the weights that make a converted or exported directory load as it is with
// transformers' Auto* classes: the tokenizer files and generation_config.json of a Hugging Face
// model directory, or a generation_config.json derived from config.json as transformers does.
#include <array>
#include <string_view>

#include <nlohmann/json.hpp>

#include "checkpoint/convert/consolidate.h"
#include "fs/file_system.h"

namespace tierzero::checkpoint {
namespace {

// What transformers' tokenizers save (PreTrainedTokenizerBase.save_pretrained and the
// vocab_files_names of the fast and slow tokenizers of the Llama, Mistral, Qwen, GPT-2 and BERT
// families) and read back from a model directory.
constexpr std::array<std::string_view, 12> kTokenizerFiles = {
    "tokenizer.json",   "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "tokenizer.model",  "spiece.model",          "sentencepiece.bpe.model", "vocab.json",
    "merges.txt",       "vocab.txt",             "chat_template.jinja",     "chat_template.json"};

// The config.json keys transformers' GenerationConfig.from_model_config carries over for a
// decoder-only language model (the token ids; unset or null ones stay out, as there).
constexpr std::array<std::string_view, 4> kGenerationTokenKeys = {"bos_token_id", "eos_token_id", "pad_token_id",
                                                                  "decoder_start_token_id"};

bool is_file(fs::FileSystem& file_system, const std::string& path) {
  const Result<fs::FileInfo> info = file_system.stat(path);
  return info.ok() && !info->is_dir;
}

Status add_file(fs::FileSystem& file_system, const std::string& dir, const std::string& name,
                std::vector<CompanionFile>& files) {
  TZ_ASSIGN_OR_RETURN(std::string text, file_system.read_file(dir + "/" + name));
  files.push_back({name, std::move(text), dir});
  return Status();
}

}  // namespace

std::vector<std::string> tokenizer_files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (dir.empty()) return names;
  for (std::string_view name : kTokenizerFiles) {
    if (is_file(fs::default_file_system(), dir + "/" + std::string(name))) names.emplace_back(name);
  }
  return names;
}

Result<std::string> generation_config_from(const std::string& config_json) {
  const nlohmann::ordered_json config = nlohmann::ordered_json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return corrupt("the model's config.json is not a JSON object; a generation_config.json cannot be derived from it");
  }
  nlohmann::ordered_json generation = {{"_from_model_config", true}};
  for (std::string_view key : kGenerationTokenKeys) {
    const auto it = config.find(key);
    if (it != config.end() && !it->is_null()) generation[std::string(key)] = *it;
  }
  if (config.contains("transformers_version")) generation["transformers_version"] = config["transformers_version"];
  return generation.dump(2) + "\n";
}

Status check_config_matches(const std::string& config_json, const std::vector<TensorSpec>& tensors) {
  const nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return corrupt("the model's config.json is not a JSON object");
  const auto vocab = config.find("vocab_size"), hidden = config.find("hidden_size");
  if (vocab == config.end() || hidden == config.end() || !vocab->is_number_integer() || !hidden->is_number_integer()) {
    return Status();
  }
  for (const TensorSpec& tensor : tensors) {
    if (tensor.name != "model.embed_tokens.weight") continue;
    const std::vector<int64_t> expected = {vocab->get<int64_t>(), hidden->get<int64_t>()};
    if (tensor.shape == expected) return Status();
    std::string shape;
    for (int64_t d : tensor.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    return invalid_argument("config.json says vocab_size " + std::to_string(expected[0]) + ", hidden_size " +
                            std::to_string(expected[1]) + " but the checkpoint's model.embed_tokens.weight is [" +
                            shape + "]: it is another model's config; pass the config.json of the model this "
                            "checkpoint trained");
  }
  return Status();
}

Result<std::vector<CompanionFile>> collect_companion_files(const std::vector<std::string>& dirs,
                                                           const std::string& config_json) {
  fs::FileSystem& file_system = fs::default_file_system();
  std::vector<CompanionFile> files;
  for (const std::string& dir : dirs) {
    const std::vector<std::string> names = tokenizer_files_in(dir);
    if (names.empty()) continue;
    for (const std::string& name : names) TZ_RETURN_IF_ERROR(add_file(file_system, dir, name, files));
    break;  // one tokenizer: every file from the same directory
  }
  for (const std::string& dir : dirs) {
    if (dir.empty() || !is_file(file_system, dir + "/generation_config.json")) continue;
    TZ_RETURN_IF_ERROR(add_file(file_system, dir, "generation_config.json", files));
    return files;
  }
  if (!config_json.empty()) {
    TZ_ASSIGN_OR_RETURN(std::string derived, generation_config_from(config_json));
    files.push_back({"generation_config.json", std::move(derived), ""});
  }
  return files;
}

}  // namespace tierzero::checkpoint
