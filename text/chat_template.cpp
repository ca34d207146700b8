// Finding a model directory's chat template and special tokens (text/internal/chat_template.h); the
// engine that compiles and renders it is chat_template_jinja.cpp (or chat_template_unavailable.cpp).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/internal/chat_template.h"

namespace tierzero::text {
namespace {

namespace fs = std::filesystem;

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return io_error("cannot read " + path.string());
  return text.str();
}

// tokenizer_config.json's "chat_template": a string, or [{"name", "template"}] whose "default"
// is used; "" when absent.
Result<std::string> config_template(const nlohmann::json& config, const std::string& where) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& named : *it) {
      if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
          named.at("template").is_string())
        return named.at("template").get<std::string>();
    }
    return corrupt(where + ": chat_template is a list without a {\"name\": \"default\", \"template\": ...} entry");
  }
  return corrupt(where + ": chat_template must be a string or a list of named templates, got " + it->type_name());
}

// The special tokens a template may use, as strings (a token is a string or {"content": ...}).
nlohmann::json special_tokens(const nlohmann::json& config) {
  nlohmann::json tokens = nlohmann::json::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    const auto it = config.find(key);
    if (it == config.end()) continue;
    if (it->is_string()) tokens[key] = *it;
    if (it->is_object() && it->contains("content") && it->at("content").is_string()) tokens[key] = it->at("content");
  }
  return tokens;
}

}  // namespace

Result<std::shared_ptr<const ChatTemplate>> ChatTemplate::load(const std::string& dir) {
  if (!engine_available()) return std::shared_ptr<const ChatTemplate>();
  const fs::path root = fs::is_regular_file(dir) ? fs::path(dir).parent_path() : fs::path(dir);
  nlohmann::json config = nlohmann::json::object();
  const fs::path config_path = root / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    TZ_ASSIGN_OR_RETURN(const std::string text, read_text(config_path));
    config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object())
      return corrupt(config_path.string() + " is not a JSON object: the file is damaged");
  }
  std::string source;
  std::string origin = (root / "chat_template.jinja").string();
  if (fs::exists(origin)) {
    TZ_ASSIGN_OR_RETURN(source, read_text(origin));
  } else {
    origin = config_path.string() + " (chat_template)";
    TZ_ASSIGN_OR_RETURN(source, config_template(config, config_path.string()));
  }
  if (source.empty()) return std::shared_ptr<const ChatTemplate>();
  return compile(source, special_tokens(config), origin);
}

std::string chat_rows_unavailable(const std::string& dir) {
  if (!ChatTemplate::engine_available()) {
    return "chat rows (\"messages\") are rendered with the model's chat template by llama.cpp's Jinja engine, which "
           "this build lacks: run scripts/setup.sh (it downloads llama-cpp-python's sdist into ~/.cache/tierzero) "
           "and rebuild, or configure with -DTIERZERO_LLAMA_CPP_SDIST=PATH";
  }
  return "chat rows (\"messages\") are rendered with the model's chat template, and " +
         (dir.empty() ? std::string("no model directory was given")
                      : dir + " has none (no chat_template.jinja, no \"chat_template\" in tokenizer_config.json)") +
         ": use the model directory of an instruct/chat model, or add its chat_template";
}

}  // namespace tierzero::text
