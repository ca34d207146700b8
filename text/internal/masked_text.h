// A tokenized row shown for a person: its text with the stretches that carry loss marked, to check
// what a dataset trains on (`tierzero data show`).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/common.h"
#include "text/internal/tokenizer.h"

namespace tierzero::text {

// The decoded text of `tokens` (special tokens shown) with each run of tokens whose `mask` is 1
// wrapped in "[[" and "]]"; an empty `mask` means every token is trained. kInvalidArgument when
// the sizes differ or an id is not in the vocabulary.
Result<std::string> masked_text(std::span<const uint32_t> tokens, std::span<const uint8_t> mask,
                                const Tokenizer& tokenizer);

}  // namespace tierzero::text
