// JSONL of text rows tokenized in memory with the model's tokenizer (text/internal/dataset.h; chat rows
// rendered with its chat template, text/internal/chat_rows.h) and packed into seq_len + 1 token windows
// exactly as a token file is, the loss mask applied to targets.
#include "engine/data/token_data.h"
#include "text/text.h"

namespace tierzero::engine {
namespace {

class TokenStreamSource final : public SampleSource {
 public:
  TokenStreamSource(text::TokenStream stream, int64_t seq_len) : stream_(std::move(stream)), seq_len_(seq_len) {}

  int64_t size() const override {
    return static_cast<int64_t>((stream_.tokens.size() - 1) / static_cast<uint64_t>(seq_len_));
  }
  int64_t seq_len() const override { return seq_len_; }

  Status read(int64_t index, int64_t* input_ids, int64_t* targets) const override {
    if (index < 0 || index >= size()) {
      return invalid_argument("sample " + std::to_string(index) + " is outside [0, " + std::to_string(size()) + ")");
    }
    const size_t first = static_cast<size_t>(index) * static_cast<size_t>(seq_len_);
    for (int64_t t = 0; t < seq_len_; ++t) {
      const size_t next = first + static_cast<size_t>(t) + 1;
      input_ids[t] = stream_.tokens[next - 1];
      const bool target = stream_.loss_mask.empty() || stream_.loss_mask[next] != 0;
      targets[t] = target ? int64_t{stream_.tokens[next]} : kIgnoreIndex;
    }
    return {};
  }

 private:
  text::TokenStream stream_;
  int64_t seq_len_;
};

}  // namespace

Result<std::shared_ptr<const SampleSource>> open_text_jsonl(const std::string& path, int64_t seq_len,
                                                            const std::string& tokenizer_dir) {
  if (seq_len < 1) return invalid_argument("seq_len must be >= 1, got " + std::to_string(seq_len));
  TZ_ASSIGN_OR_RETURN(const std::shared_ptr<const text::Tokenizer> tokenizer, text::Tokenizer::load(tokenizer_dir));
  const text::ChatRowFormat chat = text::ChatRowFormat::load(tokenizer_dir);
  TZ_ASSIGN_OR_RETURN(text::TokenStream stream, text::tokenize_jsonl_file(path, *tokenizer, nullptr, &chat));
  if (stream.tokens.size() < static_cast<size_t>(seq_len) + 1) {
    return invalid_argument(path + " gives " + std::to_string(stream.tokens.size()) +
                            " tokens, fewer than seq_len + 1 = " + std::to_string(seq_len + 1) +
                            ": use a shorter seq_len or more data");
  }
  return std::shared_ptr<const SampleSource>(std::make_shared<TokenStreamSource>(std::move(stream), seq_len));
}

}  // namespace tierzero::engine
