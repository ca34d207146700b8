// The parts of a loaded Tokenizer (text/internal/tokenizer.h), shared by its loader and its encoder.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>

#include <tbb/enumerable_thread_specific.h>

#include "text/internal/added_tokens.h"
#include "text/internal/bpe.h"
#include "text/internal/decoder.h"
#include "text/internal/normalizer.h"
#include "text/internal/post_processor.h"
#include "text/internal/pre_tokenizer.h"
#include "text/internal/tokenizer.h"

namespace tierzero::text {

struct Tokenizer::Impl {
  struct AddedToken {
    std::string content;
    bool special;
  };
  // One encoding thread's working memory.
  struct Scratch {
    std::string normalized;
    internal::PreTokenizerScratch pre;
    internal::BpeScratch bpe;
  };

  std::string source;  // where it was loaded from, for messages
  std::string family;
  internal::AddedTokenMatcher raw_added;         // added tokens with normalized: false
  internal::AddedTokenMatcher normalized_added;  // normalized: true, matched after the normalizer
  std::unordered_map<uint32_t, AddedToken> added_by_id;
  internal::StringMap<uint32_t> added_by_content;
  internal::Normalizer normalizer;
  internal::PreTokenizer pre_tokenizer;
  std::optional<internal::Bpe> bpe;
  internal::PostProcessor post_processor;
  internal::Decoder decoder;
  std::optional<uint32_t> bos, eos;
  uint32_t vocab_size = 0;
  mutable tbb::enumerable_thread_specific<Scratch> scratch;

  // Encodes one stretch of raw text between added tokens; `at_start` when it begins the input.
  Status encode_piece(std::string_view piece, bool at_start, Scratch& s, std::vector<uint32_t>& ids) const;
  // Pre-tokenizes normalized text and runs BPE on each word.
  Status encode_words(std::string_view normalized, bool at_start, Scratch& s, std::vector<uint32_t>& ids) const;
};

}  // namespace tierzero::text
