// Chat rows: {"messages": [{"role": ..., "content": ...}, ...]} (optionally "tools": [...]), the
// format of most instruction-tuning data, turned into token ids and a loss mask that trains the
// assistant turns only.
//
// A row becomes ids = tokenizer.encode(chat_template.render(messages, tools), no special tokens),
// what transformers' apply_chat_template(messages, tools=tools, tokenize=True) returns (the
// template writes BOS itself where the model has one). No EOS is appended: the template ends every
// turn with the model's own end-of-turn token.
//
// The mask (1 = the token is a training target): every token that overlaps an assistant
// message's content in the rendered text (text/internal/chat_template.h says how that text is
// found; a token that straddles its edge counts), and the special token right after each such
// stretch when there is one: the turn's end (<|im_end|>, <|eot_id|>, <|end|> ...), which the model
// must learn to emit to stop. The template's own text (role headers, system prompt, the user's
// turns) carries no loss. This is the mask of transformers' return_assistant_tokens_mask for a
// template whose {% generation %} block holds the content and the end-of-turn token.
//
// How a text position maps to tokens without offsets: the ids of text[0, b) share a prefix of k
// tokens with the ids of the whole text; when those are all of them, b falls between tokens k - 1
// and k, otherwise token k straddles b. Cost: two encodes of a prefix per assistant stretch, so a
// row of A assistant turns costs about A times its own encode (10 turns of 200 words: 180k tokens/s
// on 2 cores, text rows 1.5M).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "text/internal/chat_template.h"
#include "text/internal/tokenizer.h"

namespace tierzero::text {

// What chat rows are rendered with: a model directory's chat template, or why there is none.
struct ChatRowFormat {
  std::shared_ptr<const ChatTemplate> chat_template;  // nullptr: chat rows are refused with `unavailable`
  std::string unavailable;

  // The chat template of model directory `dir` (ChatTemplate::load), or why chat rows cannot be
  // read with it: it has none, this build has no engine, or the template does not load (that
  // error, so a template the engine cannot parse stops chat rows only, not the other kinds).
  static ChatRowFormat load(const std::string& dir);
};

// True when `row` is a chat row (an object with "messages").
bool is_chat_row(const nlohmann::ordered_json& row);

// Appends the ids of chat row `row` (format above; ordered, as `tools | tojson` shows the keys in
// the row's order) to `tokens` and its assistant mask to `mask`.
// kInvalidArgument saying what to fix when `format` has no template, "messages" is not a
// non-empty array of objects with a string "role", no message is the assistant's (the row would
// train nothing), the template fails on it, or its text is not UTF-8.
Status tokenize_chat_row(const nlohmann::ordered_json& row, const ChatRowFormat& format, const Tokenizer& tokenizer,
                         std::vector<uint32_t>& tokens, std::vector<uint8_t>& mask);

// The assistant mask (above) of `ids` = tokenizer.encode(rendered.text, false): one 0/1 per id.
Result<std::vector<uint8_t>> assistant_token_mask(const RenderedChat& rendered, const std::vector<uint32_t>& ids,
                                                  const Tokenizer& tokenizer);

}  // namespace tierzero::text
