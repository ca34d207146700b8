// JSONL datasets for causal-LM fine-tuning, tokenized with the model's own tokenizer.
//
// One JSON object per line (blank lines are skipped):
//   {"text": "..."}                          every token is a training target
//   {"prompt": "...", "completion": "..."}   only the completion's tokens are (the prompt's get
//                                            label -100 when the trainer builds its targets)
//   {"messages": [{"role": ..., "content": ...}, ...]}   a chat rendered with the model's chat
//                                            template; only the assistant turns' tokens are
//                                            (text/internal/chat_rows.h, no EOS appended)
//   {"prompt": [messages], "completion": [messages]}   TRL's conversational prompt-completion:
//                                            rendered with the chat template, only the
//                                            completion's tokens are (chat_rows.h, no EOS appended)
// A row becomes encode(text, add_special_tokens) — the model's BOS where its tokenizer adds one —
// or encode(prompt, add_special_tokens) followed by encode(completion, no special tokens); then
// the EOS of tokenizer_config.json unless the row already ends with it. Rows follow each other
// in file order in one token stream, which the trainer packs into seq_len samples
// (engine/data/token_data.h).
//
// Token file written by write_token_stream() (TZTOKENS; version 1 is engine/data/token_data.h's):
//   0  char[8]  "TZTOKENS"
//   8  uint32   version: 1 without a loss mask, 2 with one
//   12 uint32   bytes per token: 2 when every id fits uint16, else 4
//   16 uint64   token count
//   24 uint64   version 1: 0; version 2: flags, bit 0 set = a loss mask follows the tokens
//   32          the tokens, little-endian
//   then (version 2, flag bit 0) ceil(count / 8) bytes of loss mask: bit (i % 8) of byte i / 8
//               is 1 when token i is a training target (the target of position i - 1).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/common.h"
#include "text/internal/tokenizer.h"

namespace tierzero {
class ProgressBar;
}

namespace tierzero::text {

struct ChatRowFormat;

// A tokenized dataset: the stream of ids and, when some tokens are not targets, which are.
struct TokenStream {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> loss_mask;  // one 0/1 per token; empty when every token is a target
  uint64_t rows = 0;
  uint64_t target_tokens = 0;  // tokens that carry loss (all of them without a mask)
};

// Tokenizes the JSONL text `data` (format above) on every core, in chunks of whole lines, and
// returns the rows' tokens in file order. `progress`, when given, advances by bytes done; chat rows
// are rendered with `chat` (ChatRowFormat::load of the model directory; without it they are
// refused). Errors name `source`, the line and what to fix: invalid JSON, a row that is not an
// object with "text", "prompt" + "completion" (strings or message lists) or "messages", text that
// is not UTF-8, a chat row tokenize_chat_row() refuses, or a tokenizer without an eos_token.
Result<TokenStream> tokenize_jsonl(std::string_view data, const Tokenizer& tokenizer, const std::string& source,
                                   ProgressBar* progress = nullptr, const ChatRowFormat* chat = nullptr);
// Reads `path` whole and tokenizes it as above.
Result<TokenStream> tokenize_jsonl_file(const std::string& path, const Tokenizer& tokenizer,
                                        ProgressBar* progress = nullptr, const ChatRowFormat* chat = nullptr);

// Writes `stream` as a token file (format above); kIo naming `path` when the write fails.
Status write_token_stream(const std::string& path, const TokenStream& stream);

}  // namespace tierzero::text
