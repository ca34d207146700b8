// Chat rows to ids and the loss mask (text/internal/chat_rows.h).
#include "text/internal/chat_rows.h"

#include <algorithm>
#include <string_view>

namespace tierzero::text {
namespace {

using Json = nlohmann::ordered_json;

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

// Sets mask[i] = 1 for every token of `ids` (the ids of `text`) that overlaps text[first, last);
// for an empty range, the token straddling it (transformers' return_assistant_tokens_mask).
Status mark_overlapping(std::string_view text, size_t first, size_t last, const std::vector<uint32_t>& ids,
                        const Tokenizer& tokenizer, std::vector<uint8_t>& mask) {
  TZ_ASSIGN_OR_RETURN(const Boundary start, boundary_at(text, first, ids, tokenizer));
  TZ_ASSIGN_OR_RETURN(const Boundary end, boundary_at(text, last, ids, tokenizer));
  const size_t end_token = std::min(ids.size(), end.tokens_before + (end.straddled ? 1 : 0));
  std::fill(mask.begin() + static_cast<std::ptrdiff_t>(std::min(start.tokens_before, end_token)),
            mask.begin() + static_cast<std::ptrdiff_t>(end_token), uint8_t{1});
  return {};
}

// The length of the longest common prefix of `a` and `b`, backed off to a UTF-8 character start.
size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = static_cast<size_t>(std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin());
  while (n > 0 && n < a.size() && (static_cast<unsigned char>(a[n]) & 0xC0) == 0x80) --n;
  return n;
}

// A token that decoding drops when special tokens are skipped (and only then).
bool is_special(uint32_t id, const Tokenizer& tokenizer) {
  const std::vector<uint32_t> one{id};
  const Result<std::string> shown = tokenizer.decode(one, /*skip_special_tokens=*/false);
  const Result<std::string> skipped = tokenizer.decode(one, /*skip_special_tokens=*/true);
  return shown.ok() && skipped.ok() && !shown->empty() && skipped->empty();
}

Status check_messages(const Json& messages, const char* key) {
  if (!messages.is_array() || messages.empty())
    return invalid_argument(std::string("\"") + key +
                            "\" must be a non-empty array of {\"role\", \"content\"} objects");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string()) {
      return invalid_argument(std::string(key) + " message " + std::to_string(i) +
                              " must be an object with a string \"role\" (system, user, assistant ...), got " +
                              m.dump());
    }
  }
  return {};
}

bool is_assistant(const Json& message) { return message.at("role").get_ref<const std::string&>() == "assistant"; }

Json first_messages(const Json& messages, size_t count) {
  return Json(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(count));
}

// Assistant turn `i` of `messages` without {% generation %} blocks (the rule of chat_rows.h): its
// [first, last) byte range in `text`, the rendered conversation.
Result<std::pair<size_t, size_t>> assistant_turn(const ChatTemplate& chat_template, const Json& messages,
                                                 const Json& tools, size_t i, std::string_view text,
                                                 const Tokenizer& tokenizer) {
  const auto where = [&](const Status& s) {
    return s.with_context("rendering the messages up to assistant message " + std::to_string(i) +
                          " (to find its turn)");
  };
  Result<RenderedChat> prompt = chat_template.render(first_messages(messages, i), tools, true);
  if (!prompt.ok()) return where(prompt.status());
  Result<RenderedChat> through = chat_template.render(first_messages(messages, i + 1), tools, false);
  if (!through.ok()) return where(through.status());
  const size_t first = common_prefix(text, prompt->text);
  const std::string_view turn = std::string_view(through->text).substr(common_prefix(through->text, prompt->text));
  TZ_ASSIGN_OR_RETURN(const std::vector<uint32_t> turn_ids, tokenizer.encode(turn, false));
  const auto end_of_turn =
      std::find_if(turn_ids.begin(), turn_ids.end(), [&](uint32_t id) { return is_special(id, tokenizer); });
  size_t last = common_prefix(text, through->text);
  if (end_of_turn != turn_ids.end()) {
    TZ_ASSIGN_OR_RETURN(const std::string marker, tokenizer.decode(std::vector<uint32_t>{*end_of_turn}, false));
    const size_t at = text.find(marker, first);
    if (at != std::string_view::npos) last = at + marker.size();
  }
  if (last <= first) {
    return invalid_argument("assistant message " + std::to_string(i) +
                            " cannot be found in the rendered conversation: the template renders the messages before "
                            "it differently when the conversation goes on; add {% generation %} blocks to the "
                            "template to say which text is the assistant's");
  }
  return std::pair<size_t, size_t>{first, last};
}

// A {"messages"} row: ids and the assistant mask (chat_rows.h).
Status tokenize_messages(const Json& row, const ChatTemplate& chat_template, const Json& tools,
                         const Tokenizer& tokenizer, std::vector<uint32_t>& ids, std::vector<uint8_t>& mask) {
  if (row.contains("text") || row.contains("prompt") || row.contains("completion"))
    return invalid_argument("give \"messages\" (a chat) or \"text\" or \"prompt\" + \"completion\", not several");
  const Json& messages = row.at("messages");
  TZ_RETURN_IF_ERROR(check_messages(messages, "messages"));
  if (std::none_of(messages.begin(), messages.end(), is_assistant)) {
    return invalid_argument(
        "no message has role \"assistant\", so the row would train nothing (only assistant turns carry loss)");
  }
  TZ_ASSIGN_OR_RETURN(const RenderedChat rendered, chat_template.render(messages, tools));
  TZ_ASSIGN_OR_RETURN(ids, tokenizer.encode(rendered.text, false));
  mask.assign(ids.size(), 0);
  if (chat_template.has_generation_blocks()) {
    for (const auto& [first, last] : rendered.generation_spans)
      TZ_RETURN_IF_ERROR(mark_overlapping(rendered.text, first, last, ids, tokenizer, mask));
    if (std::find(mask.begin(), mask.end(), uint8_t{1}) == mask.end()) {
      return invalid_argument(
          "the template's {% generation %} blocks wrote nothing for this row, so it would train "
          "nothing (TRL's assistant_only_loss refuses such a row too)");
    }
    return {};
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!is_assistant(messages[i])) continue;
    TZ_ASSIGN_OR_RETURN(const auto turn, assistant_turn(chat_template, messages, tools, i, rendered.text, tokenizer));
    TZ_RETURN_IF_ERROR(mark_overlapping(rendered.text, turn.first, turn.second, ids, tokenizer, mask));
  }
  return {};
}

// A conversational {"prompt", "completion"} row: TRL's ids and completion mask (chat_rows.h).
Status tokenize_prompt_completion(const Json& row, const ChatTemplate& chat_template, const Json& tools,
                                  const Tokenizer& tokenizer, std::vector<uint32_t>& ids, std::vector<uint8_t>& mask) {
  if (row.contains("text")) return invalid_argument("give \"text\" or \"prompt\" + \"completion\", not both");
  const auto prompt = row.find("prompt"), completion = row.find("completion");
  if (prompt == row.end() || completion == row.end() || !prompt->is_array() || !completion->is_array()) {
    return invalid_argument(
        "a conversational prompt-completion row gives both \"prompt\" and \"completion\" as message lists "
        "([{\"role\": ..., \"content\": ...}]); for plain text give both as strings");
  }
  TZ_RETURN_IF_ERROR(check_messages(*prompt, "prompt"));
  TZ_RETURN_IF_ERROR(check_messages(*completion, "completion"));
  Json conversation = *prompt;
  conversation.insert(conversation.end(), completion->begin(), completion->end());
  TZ_ASSIGN_OR_RETURN(const RenderedChat full, chat_template.render(conversation, tools));
  TZ_ASSIGN_OR_RETURN(const RenderedChat alone, chat_template.render(*prompt, tools, true));
  TZ_ASSIGN_OR_RETURN(ids, tokenizer.encode(full.text, false));
  TZ_ASSIGN_OR_RETURN(const std::vector<uint32_t> prompt_ids, tokenizer.encode(alone.text, false));
  const auto shared = std::mismatch(prompt_ids.begin(), prompt_ids.end(), ids.begin(), ids.end());
  const auto prompt_tokens = static_cast<size_t>(shared.second - ids.begin());
  if (prompt_tokens == ids.size()) {
    return invalid_argument(
        "the completion adds no token after the prompt (rendered with the generation prompt), "
        "so the row would train nothing");
  }
  mask.assign(ids.size(), 1);
  std::fill(mask.begin(), mask.begin() + static_cast<std::ptrdiff_t>(prompt_tokens), uint8_t{0});
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

bool is_chat_row(const Json& row) {
  if (!row.is_object()) return false;
  const auto prompt = row.find("prompt"), completion = row.find("completion");
  return row.contains("messages") || (prompt != row.end() && prompt->is_array()) ||
         (completion != row.end() && completion->is_array());
}

Status tokenize_chat_row(const Json& row, const ChatRowFormat& format, const Tokenizer& tokenizer,
                         std::vector<uint32_t>& tokens, std::vector<uint8_t>& mask) {
  if (!format.chat_template) return invalid_argument(format.unavailable);
  const auto tools_it = row.find("tools");
  const Json tools = tools_it == row.end() ? Json() : *tools_it;
  std::vector<uint32_t> ids;
  std::vector<uint8_t> row_mask;
  TZ_RETURN_IF_ERROR(row.contains("messages")
                         ? tokenize_messages(row, *format.chat_template, tools, tokenizer, ids, row_mask)
                         : tokenize_prompt_completion(row, *format.chat_template, tools, tokenizer, ids, row_mask));
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  mask.insert(mask.end(), row_mask.begin(), row_mask.end());
  return {};
}

}  // namespace tierzero::text
