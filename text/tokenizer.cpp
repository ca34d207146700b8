// Encoding and decoding, in tokenizers' order: added tokens in the raw text, then per remaining
// piece the normalizer, added tokens in the normalized text, the pre-tokenizer, BPE per word;
// finally the post-processor's special tokens.
#include "text/internal/tokenizer_impl.h"
#include "text/internal/utf8.h"

namespace tierzero::text {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Status Tokenizer::Impl::encode_words(std::string_view normalized, bool at_start, Scratch& s,
                                     std::vector<uint32_t>& ids) const {
  TZ_RETURN_IF_ERROR(pre_tokenizer.split(normalized, at_start, s.pre));
  for (const internal::Piece& word : s.pre.pieces) bpe->encode_word(word.text, s.bpe, ids);
  return {};
}

Status Tokenizer::Impl::encode_piece(std::string_view piece, bool at_start, Scratch& s,
                                     std::vector<uint32_t>& ids) const {
  const std::string_view normalized = normalizer.apply(piece, s.normalized);
  if (normalized_added.empty()) return encode_words(normalized, at_start, s, ids);
  return normalized_added.split(
      normalized,
      [&](std::string_view part, size_t offset) { return encode_words(part, at_start && offset == 0, s, ids); },
      [&](uint32_t id) { ids.push_back(id); });
}

Status Tokenizer::encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids) const {
  if (const size_t bad = internal::find_invalid_utf8(text); bad != std::string_view::npos) {
    return invalid_argument("text is not valid UTF-8 at byte " + std::to_string(bad) +
                            ": tokenizers encode Unicode text; convert the input to UTF-8");
  }
  const Impl& impl = *impl_;
  Impl::Scratch& s = impl.scratch.local();
  if (add_special_tokens) ids.insert(ids.end(), impl.post_processor.prefix.begin(), impl.post_processor.prefix.end());
  if (impl.raw_added.empty()) {
    TZ_RETURN_IF_ERROR(impl.encode_piece(text, true, s, ids));
  } else {
    TZ_RETURN_IF_ERROR(impl.raw_added.split(
        text, [&](std::string_view piece, size_t offset) { return impl.encode_piece(piece, offset == 0, s, ids); },
        [&](uint32_t id) { ids.push_back(id); }));
  }
  if (add_special_tokens) ids.insert(ids.end(), impl.post_processor.suffix.begin(), impl.post_processor.suffix.end());
  return {};
}

Result<std::vector<uint32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<uint32_t> ids;
  TZ_RETURN_IF_ERROR(encode(text, add_special_tokens, ids));
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const uint32_t id : ids) {
    std::optional<std::string> token = id_to_token(id);
    if (!token) {
      return invalid_argument("token id " + std::to_string(id) + " is not in the vocabulary of " + impl_->source +
                              " (" + std::to_string(vocab_size()) + " ids)");
    }
    const auto added = impl_->added_by_content.find(*token);
    const bool special = added != impl_->added_by_content.end() && impl_->added_by_id.at(added->second).special;
    if (skip_special_tokens && special) continue;
    tokens.push_back(std::move(*token));
  }
  return impl_->decoder.decode(std::move(tokens));
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  return impl_->bpe->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(uint32_t id) const {
  if (const auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) return it->second.content;
  const auto& tokens = impl_->bpe->tokens();
  if (id < tokens.size() && !tokens[id].empty()) return tokens[id];
  return std::nullopt;
}

uint32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<uint32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<uint32_t> Tokenizer::eos_id() const { return impl_->eos; }
const std::string& Tokenizer::family() const { return impl_->family; }

}  // namespace tierzero::text
