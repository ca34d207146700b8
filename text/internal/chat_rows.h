// Chat rows, the format of most instruction-tuning data, turned into token ids and a loss mask:
//   {"messages": [{"role": ..., "content": ...}, ...], "tools"?: [...]}
//       a conversation; its assistant turns are trained (as transformers + TRL's assistant_only_loss)
//   {"prompt": [messages], "completion": [messages], "tools"?: [...]}
//       TRL's conversational prompt-completion row; the completion is trained (as TRL's SFTTrainer)
// "content" is passed to the template as the row gives it: a string, a list of content parts
// ([{"type": "text", "text": ...}]) or absent; a template that cannot take it fails as in
// transformers (text/internal/chat_template.h), and the row is refused with that error.
//
// Messages rows: ids = tokenizer.encode(chat_template.render(messages, tools), no special tokens),
// what transformers' apply_chat_template(messages, tools=tools, tokenize=True) returns (the
// template writes BOS itself where the model has one). No EOS is appended: the template ends every
// turn with the model's own end-of-turn token. The mask (1 = the token is a training target):
//   - a template with {% generation %} blocks: every token overlapping the text a block wrote,
//     exactly transformers' return_assistant_tokens_mask (what TRL's assistant_only_loss trains);
//   - otherwise each assistant turn as the template renders it, which is what the model must
//     generate: from where the generation prompt ends (the text shared by the full conversation and
//     render(messages before the turn, add_generation_prompt=True)) through the turn's end-of-turn
//     token (the first special token of render(messages up to the turn) after that point:
//     <|im_end|>, <|eot_id|>, <|end|> ...; its first occurrence in the conversation from the turn's
//     start), tool calls included; without any special token, up to where render(messages up to
//     the turn) and the conversation part. Tokens overlapping that text are 1. The template's own text
//     (system prompt, the user's and tools' turns, role headers, the separator after the
//     end-of-turn token) carries no loss.
//
// Prompt-completion rows (TRL 1.16's SFTTrainer tokenize_fn with its defaults): ids =
// encode(render(prompt + completion, tools)); the first k tokens carry no loss, where k is the
// number of leading ids it shares with encode(render(prompt, tools, add_generation_prompt=True)),
// and every later token is trained ({% generation %} blocks do not narrow it: that is TRL's
// assistant_only_loss, off by default).
//
// How a text position maps to tokens without offsets: the ids of text[0, b) share a prefix of k
// tokens with the ids of the whole text; when those are all of them, b falls between tokens k - 1
// and k, otherwise token k straddles b. Cost: a few renders and two encodes of a prefix per
// assistant turn, so a row of A assistant turns costs about A times its own encode.
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

// True when `row` is a chat row: an object with "messages", or whose "prompt" or "completion" is
// an array (messages).
bool is_chat_row(const nlohmann::ordered_json& row);

// Appends the ids of chat row `row` (formats above; ordered, as `tools | tojson` shows the keys in
// the row's order) to `tokens` and its mask to `mask`.
// kInvalidArgument saying what to fix when `format` has no template, the row mixes "messages" with
// "text" / "prompt" / "completion" or gives only one of "prompt" and "completion" as messages, a
// message list is not a non-empty array of objects with a string "role", a messages row has no
// assistant message, the template fails on it (as transformers would), an assistant turn cannot be
// found in the rendered text, the row would train nothing, or its text is not UTF-8.
Status tokenize_chat_row(const nlohmann::ordered_json& row, const ChatRowFormat& format, const Tokenizer& tokenizer,
                         std::vector<uint32_t>& tokens, std::vector<uint8_t>& mask);

}  // namespace tierzero::text
