// The tokens that end a generation. Private to engine/generate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"
#include "text/text.h"

namespace tierzero::engine {

// The model's end-of-sequence ids: generation_config.json's "eos_token_id" (one id or a list: chat
// models list their end-of-turn token there), else config.json's (what transformers' generate() stops
// at), together with the tokenizer's eos_token (tokenizer_config.json). kCorrupt naming the file when
// eos_token_id is neither an id nor a list of ids.
Result<std::vector<uint32_t>> stop_token_ids(const std::string& model_dir, const text::Tokenizer& tokenizer);

}  // namespace tierzero::engine
