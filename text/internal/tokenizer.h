// A model's own tokenizer, read from its Hugging Face tokenizer.json (+ tokenizer_config.json),
// encoding and decoding exactly as the `tokenizers` package does for two families:
//   - byte-level BPE (Llama 3, Qwen2, GPT-2): normalizer none or NFC; pre_tokenizer Split(regex,
//     Isolated) then ByteLevel, or ByteLevel alone; decoder ByteLevel;
//   - SentencePiece-style BPE (Llama 2, Mistral): normalizer Sequence[Prepend("▁"),
//     Replace(" ", "▁")] or pre_tokenizer Metaspace; byte_fallback (<0xNN>), unk; decoder
//     Sequence[Replace("▁", " "), ByteFallback, Fuse, Strip(" ", 1, 0)] or Metaspace.
// Added tokens are matched in the raw text first; the post_processor (TemplateProcessing,
// ByteLevel) adds BOS/EOS when special tokens are asked for. Anything else in the file is refused
// by name when it is loaded.
//
// tokenizer_config.json gives bos_token and eos_token (a string or {"content": ...}) and, as
// transformers does, add_bos_token / add_eos_token: when either key is present the template
// becomes [BOS if add_bos_token] text [EOS if add_eos_token].
//
// A Tokenizer is immutable once loaded and may encode from many threads at once (each thread
// keeps its own word cache and regex match state).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/common.h"

namespace tierzero::text {

class Tokenizer {
 public:
  // Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json; `path` may also name a
  // tokenizer.json itself (the config is then looked for beside it). kNotFound naming the path
  // when there is no tokenizer.json, kUnsupported naming the component and type that is not
  // supported, kCorrupt naming the file and what is wrong.
  static Result<std::shared_ptr<const Tokenizer>> load(const std::string& path);
  // The same from the two files' contents (`config_json` may be empty); `source` names them in
  // errors.
  static Result<std::shared_ptr<const Tokenizer>> from_json(std::string_view tokenizer_json,
                                                            std::string_view config_json, const std::string& source);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Appends the ids of `text` to `ids`: tokenizers' encode(text, add_special_tokens).ids.
  // kInvalidArgument naming the byte offset when `text` is not valid UTF-8.
  Status encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids) const;
  // The ids of `text` (add_special_tokens: the post-processor's BOS/EOS).
  Result<std::vector<uint32_t>> encode(std::string_view text, bool add_special_tokens = true) const;

  // tokenizers' decode(ids, skip_special_tokens). kInvalidArgument naming an id that is neither in
  // the vocabulary nor an added token.
  Result<std::string> decode(std::span<const uint32_t> ids, bool skip_special_tokens = true) const;

  // The id of a token (added tokens first, then the model's vocabulary).
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  // The token of an id, or nullopt.
  std::optional<std::string> id_to_token(uint32_t id) const;
  // One more than the largest id (vocabulary and added tokens).
  uint32_t vocab_size() const;
  // tokenizer_config.json's bos_token / eos_token, as ids; nullopt when unset.
  std::optional<uint32_t> bos_id() const;
  std::optional<uint32_t> eos_id() const;
  // "byte-level BPE" or "SentencePiece BPE".
  const std::string& family() const;

  struct Impl;  // opaque: text/internal/tokenizer_impl.h

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tierzero::text
