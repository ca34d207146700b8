// Reading tokenizer.json and tokenizer_config.json into a Tokenizer, refusing what is not supported.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/internal/tokenizer_impl.h"

namespace tierzero::text {
namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return io_error("cannot read " + path);
  return text.str();
}

Result<nlohmann::json> parse_json(std::string_view text, const std::string& where) {
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return corrupt(where + " is not a JSON object: the file is damaged or not a Hugging Face tokenizer file");
  }
  return json;
}

const nlohmann::json& member_or_null(const nlohmann::json& object, const char* key) {
  static const nlohmann::json null;
  const auto it = object.find(key);
  return it == object.end() ? null : *it;
}

Status read_added_tokens(const nlohmann::json& spec, const std::string& path, Tokenizer::Impl& impl) {
  for (const auto& token : member_or_null(spec, "added_tokens")) {
    const auto content = token.at("content").get<std::string>();
    const auto id = token.at("id").get<uint32_t>();
    for (const char* key : {"single_word", "lstrip", "rstrip"}) {
      if (token.value(key, false)) {
        return unsupported(path + ": added token \"" + content + "\" sets " + key +
                           ", which is not supported (only tokens matched as written, as in Llama / Qwen2 / Mistral)");
      }
    }
    if (content.empty()) return corrupt(path + ": added token " + std::to_string(id) + " has empty content");
    const bool normalized = token.value("normalized", !token.value("special", false));
    if (normalized) {
      std::string storage;
      impl.normalized_added.add(std::string(impl.normalizer.apply(content, storage)), id);
    } else {
      impl.raw_added.add(content, id);
    }
    impl.added_by_id[id] = {content, token.value("special", false)};
    impl.added_by_content[content] = id;
  }
  impl.raw_added.finish();
  impl.normalized_added.finish();
  return {};
}

// A bos_token / eos_token entry: a string, {"content": ...}, or null.
Result<std::optional<uint32_t>> special_id(const nlohmann::json& config, const char* key, const Tokenizer& tokenizer,
                                           const std::string& path) {
  const nlohmann::json& entry = member_or_null(config, key);
  if (entry.is_null()) return std::optional<uint32_t>();
  const auto name = entry.is_object() ? entry.at("content").get<std::string>() : entry.get<std::string>();
  const auto id = tokenizer.token_to_id(name);
  if (!id) {
    return corrupt(path + ": " + key + " \"" + name +
                   "\" is not a token of tokenizer.json: the two files do not belong together");
  }
  return id;
}

uint32_t vocab_size_of(const Tokenizer::Impl& impl) {
  auto size = static_cast<uint32_t>(impl.bpe->tokens().size());
  for (const auto& [id, token] : impl.added_by_id) size = std::max(size, id + 1);
  return size;
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::from_json(std::string_view tokenizer_json,
                                                              std::string_view config_json, const std::string& source) {
  TZ_ASSIGN_OR_RETURN(const nlohmann::json spec, parse_json(tokenizer_json, source));
  auto impl = std::make_unique<Impl>();
  impl->source = source;
  try {
    for (const char* key : {"truncation", "padding"}) {
      if (!member_or_null(spec, key).is_null()) {
        return unsupported(source + ": " + key + " is set (" + spec.at(key).dump() +
                           "), which is not supported: set it to null (tierzero packs and pads samples itself)");
      }
    }
    TZ_ASSIGN_OR_RETURN(impl->normalizer, internal::Normalizer::parse(member_or_null(spec, "normalizer"), source));
    TZ_ASSIGN_OR_RETURN(impl->pre_tokenizer,
                        internal::PreTokenizer::parse(member_or_null(spec, "pre_tokenizer"), source));
    if (!spec.contains("model")) return corrupt(source + " has no \"model\"");
    TZ_ASSIGN_OR_RETURN(impl->bpe, internal::Bpe::parse(spec.at("model"), impl->pre_tokenizer.byte_level(), source));
    TZ_ASSIGN_OR_RETURN(impl->post_processor,
                        internal::PostProcessor::parse(member_or_null(spec, "post_processor"), source));
    TZ_ASSIGN_OR_RETURN(impl->decoder, internal::Decoder::parse(member_or_null(spec, "decoder"), source));
    TZ_RETURN_IF_ERROR(read_added_tokens(spec, source, *impl));
  } catch (const nlohmann::json::exception& e) {
    return corrupt(source + ": " + e.what() + " (a key is missing or has the wrong type)");
  }
  impl->family = impl->pre_tokenizer.byte_level() ? "byte-level BPE" : "SentencePiece-style BPE";
  impl->vocab_size = vocab_size_of(*impl);
  Impl& parts = *impl;
  auto tokenizer = std::shared_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
  if (config_json.empty()) return std::shared_ptr<const Tokenizer>(tokenizer);

  const std::string config_source = source + " (tokenizer_config.json)";
  TZ_ASSIGN_OR_RETURN(const nlohmann::json config, parse_json(config_json, config_source));
  try {
    TZ_ASSIGN_OR_RETURN(parts.bos, special_id(config, "bos_token", *tokenizer, config_source));
    TZ_ASSIGN_OR_RETURN(parts.eos, special_id(config, "eos_token", *tokenizer, config_source));
    // As transformers does: an explicit add_bos_token / add_eos_token replaces the template.
    if (config.contains("add_bos_token") || config.contains("add_eos_token")) {
      parts.post_processor = {};
      if (parts.bos && member_or_null(config, "add_bos_token").is_boolean() && config.at("add_bos_token").get<bool>())
        parts.post_processor.prefix.push_back(*parts.bos);
      if (parts.eos && member_or_null(config, "add_eos_token").is_boolean() && config.at("add_eos_token").get<bool>())
        parts.post_processor.suffix.push_back(*parts.eos);
    }
  } catch (const nlohmann::json::exception& e) {
    return corrupt(config_source + ": " + e.what());
  }
  return std::shared_ptr<const Tokenizer>(tokenizer);
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  const bool is_file = fs::is_regular_file(path);
  const fs::path dir = is_file ? fs::path(path).parent_path() : fs::path(path);
  const std::string json_path = is_file ? path : (dir / "tokenizer.json").string();
  if (!fs::exists(json_path)) {
    return not_found(json_path + " does not exist: pass the Hugging Face model directory that holds tokenizer.json");
  }
  TZ_ASSIGN_OR_RETURN(const std::string tokenizer_json, read_file(json_path));
  std::string config_json;
  if (const fs::path config = dir / "tokenizer_config.json"; fs::exists(config)) {
    TZ_ASSIGN_OR_RETURN(config_json, read_file(config.string()));
  }
  return from_json(tokenizer_json, config_json, json_path);
}

}  // namespace tierzero::text
