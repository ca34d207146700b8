// Marking the trained stretches of a tokenized row (text/internal/masked_text.h).
#include "text/internal/masked_text.h"

namespace tierzero::text {

Result<std::string> masked_text(std::span<const uint32_t> tokens, std::span<const uint8_t> mask,
                                const Tokenizer& tokenizer) {
  if (!mask.empty() && mask.size() != tokens.size()) {
    return invalid_argument("a loss mask of " + std::to_string(mask.size()) + " entries for " +
                            std::to_string(tokens.size()) + " tokens");
  }
  const auto trained = [&](size_t i) { return mask.empty() || mask[i] != 0; };
  std::string out;
  for (size_t first = 0; first < tokens.size();) {
    size_t last = first + 1;
    while (last < tokens.size() && trained(last) == trained(first)) ++last;
    TZ_ASSIGN_OR_RETURN(const std::string piece,
                        tokenizer.decode(tokens.subspan(first, last - first), /*skip_special_tokens=*/false));
    out += trained(first) ? "[[" + piece + "]]" : piece;
    first = last;
  }
  return out;
}

}  // namespace tierzero::text
