// Added tokens ("added_tokens" of a tokenizer.json) found in text before any other step, as
// tokenizers' AddedVocabulary does: leftmost match first, the longest of those starting there.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tierzero::text::internal {

class AddedTokenMatcher {
 public:
  // Adds a token to look for (non-empty content).
  void add(std::string content, uint32_t id);
  // Call after the last add().
  void finish();
  bool empty() const { return tokens_.empty(); }

  // Walks `text`: on_text(piece, offset) for each non-empty stretch without a token (offset: its
  // first byte in `text`), on_token(id) for each token found, in order. Stops at the first
  // non-ok Status a callback returns and returns it.
  template <typename OnText, typename OnToken>
  auto split(std::string_view text, OnText&& on_text, OnToken&& on_token) const -> decltype(on_text(text, 0)) {
    size_t done = 0;
    for (size_t at = 0; at < text.size(); ++at) {
      const auto first = static_cast<unsigned char>(text[at]);
      if (by_first_byte_[first].empty()) continue;
      for (const uint32_t index : by_first_byte_[first]) {  // longest first
        const Token& token = tokens_[index];
        if (text.size() - at < token.content.size() ||
            std::memcmp(text.data() + at, token.content.data(), token.content.size()) != 0)
          continue;
        if (at > done) {
          auto status = on_text(text.substr(done, at - done), done);
          if (!status.ok()) return status;
        }
        on_token(token.id);
        done = at + token.content.size();
        at = done - 1;
        break;
      }
    }
    if (done < text.size()) return on_text(text.substr(done), done);
    return {};
  }

 private:
  struct Token {
    std::string content;
    uint32_t id;
  };
  std::vector<Token> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;
};

}  // namespace tierzero::text::internal
