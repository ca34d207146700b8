// stop_token_ids (internal/stop_tokens.h).
#include "engine/generate/internal/stop_tokens.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace tierzero::engine {
namespace {

// The ids of `path`'s "eos_token_id" appended to `ids`; false when the file or the key is absent.
Result<bool> read_eos_ids(const std::string& path, std::vector<uint32_t>& ids) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return corrupt(path + ": not a JSON object");
  auto it = config.find("eos_token_id");
  if (it == config.end() || it->is_null()) return false;
  const nlohmann::json list = it->is_array() ? *it : nlohmann::json::array({*it});
  for (const nlohmann::json& id : list) {
    if (!id.is_number_unsigned())
      return corrupt(fmt::format("{}: \"eos_token_id\" must be a token id or a list of ids, got {}", path, it->dump()));
    ids.push_back(id.get<uint32_t>());
  }
  return true;
}

}  // namespace

Result<std::vector<uint32_t>> stop_token_ids(const std::string& model_dir, const text::Tokenizer& tokenizer) {
  std::vector<uint32_t> ids;
  TZ_ASSIGN_OR_RETURN(const bool from_generation_config, read_eos_ids(model_dir + "/generation_config.json", ids));
  // A model with neither key stops at the tokenizer's eos_token alone.
  if (!from_generation_config) TZ_RETURN_IF_ERROR(read_eos_ids(model_dir + "/config.json", ids).status());
  if (const std::optional<uint32_t> eos = tokenizer.eos_id()) ids.push_back(*eos);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace tierzero::engine
