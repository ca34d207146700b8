// Chat rows to ids and the assistant loss mask (text/internal/chat_rows.h).
#include "text/internal/chat_rows.h"

#include <algorithm>
#include <string_view>

namespace tierzero::text {
namespace {

// Where text position `b` falls among `ids` (the ids of the whole text): the number of tokens
// wholly before it, and whether the next token straddles it.
struct Boundary {
  size_t tokens_before = 0;
  bool straddled = false;
};

Result<Boundary> boundary_at(std::string_view text, size_t b, const std::vector<uint32_t>& ids,
                             const Tokenizer& tokenizer) {
  TZ_ASSIGN_OR_RETURN(const std::vector<uint32_t> prefix, tokenizer.encode(text.substr(0, b), false));
  const auto shared = std::mismatch(prefix.begin(), prefix.end(), ids.begin(), ids.end());
  const auto k = static_cast<size_t>(shared.first - prefix.begin());
  return Boundary{k, k < prefix.size()};
}

// A token that decoding drops when special tokens are skipped (and only then).
bool is_special(uint32_t id, const Tokenizer& tokenizer) {
  const std::vector<uint32_t> one{id};
  const Result<std::string> shown = tokenizer.decode(one, /*skip_special_tokens=*/false);
  const Result<std::string> skipped = tokenizer.decode(one, /*skip_special_tokens=*/true);
  return shown.ok() && skipped.ok() && !shown->empty() && skipped->empty();
}

Status check_messages(const nlohmann::ordered_json& messages) {
  if (!messages.is_array() || messages.empty())
    return invalid_argument("\"messages\" must be a non-empty array of {\"role\", \"content\"} objects");
  bool any_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const nlohmann::ordered_json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string()) {
      return invalid_argument("message " + std::to_string(i) +
                              " must be an object with a string \"role\" (system, user, assistant ...), got " +
                              m.dump());
    }
    any_assistant = any_assistant || m.at("role").get_ref<const std::string&>() == "assistant";
  }
  if (!any_assistant) {
    return invalid_argument(
        "no message has role \"assistant\", so the row would train nothing (only assistant turns carry loss)");
  }
  return {};
}

}  // namespace

ChatRowFormat ChatRowFormat::load(const std::string& dir) {
  ChatRowFormat format;
  Result<std::shared_ptr<const ChatTemplate>> loaded = ChatTemplate::load(dir);
  if (!loaded.ok()) {
    format.unavailable =
        "chat rows (\"messages\") need the model's chat template, which cannot be used: " + loaded.status().message();
  } else {
    format.chat_template = *loaded;
    if (!format.chat_template) format.unavailable = chat_rows_unavailable(dir);
  }
  return format;
}

bool is_chat_row(const nlohmann::ordered_json& row) { return row.is_object() && row.contains("messages"); }

Result<std::vector<uint8_t>> assistant_token_mask(const RenderedChat& rendered, const std::vector<uint32_t>& ids,
                                                  const Tokenizer& tokenizer) {
  std::vector<uint8_t> mask(ids.size(), 0);
  for (const auto& [first, last] : rendered.assistant_spans) {
    TZ_ASSIGN_OR_RETURN(const Boundary start, boundary_at(rendered.text, first, ids, tokenizer));
    TZ_ASSIGN_OR_RETURN(const Boundary end, boundary_at(rendered.text, last, ids, tokenizer));
    const size_t end_token = std::min(ids.size(), end.tokens_before + (end.straddled ? 1 : 0));
    std::fill(mask.begin() + static_cast<std::ptrdiff_t>(std::min(start.tokens_before, end_token)),
              mask.begin() + static_cast<std::ptrdiff_t>(end_token), uint8_t{1});
    if (!end.straddled && end_token < ids.size() && is_special(ids[end_token], tokenizer)) mask[end_token] = 1;
  }
  return mask;
}

Status tokenize_chat_row(const nlohmann::ordered_json& row, const ChatRowFormat& format, const Tokenizer& tokenizer,
                         std::vector<uint32_t>& tokens, std::vector<uint8_t>& mask) {
  if (!format.chat_template) return invalid_argument(format.unavailable);
  const nlohmann::ordered_json& messages = row.at("messages");
  TZ_RETURN_IF_ERROR(check_messages(messages));
  const auto tools = row.find("tools");
  TZ_ASSIGN_OR_RETURN(const RenderedChat rendered,
                      format.chat_template->render(messages, tools == row.end() ? nlohmann::ordered_json() : *tools));
  TZ_ASSIGN_OR_RETURN(const std::vector<uint32_t> ids, tokenizer.encode(rendered.text, false));
  TZ_ASSIGN_OR_RETURN(const std::vector<uint8_t> assistant, assistant_token_mask(rendered, ids, tokenizer));
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  mask.insert(mask.end(), assistant.begin(), assistant.end());
  return {};
}

}  // namespace tierzero::text
