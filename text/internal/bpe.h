// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}), encoding one pre-tokenized
// word at a time exactly as Hugging Face `tokenizers` does: symbols from the word's characters
// (unknown ones through byte_fallback's <0xNN> tokens, else the unk token, fused when fuse_unk),
// then the pair of lowest merge rank merged first (leftmost on ties) until none is left.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "text/internal/hash_maps.h"

namespace tierzero::text::internal {

// Per-thread working memory of Bpe::encode_word (and its word cache): one per encoding thread.
struct BpeScratch {
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    uint32_t new_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  StringMap<std::pair<uint32_t, uint32_t>> cache;  // word -> [offset, count) in cache_ids
  std::vector<uint32_t> cache_ids;
};

class Bpe {
 public:
  // Reads the "model" object of `path`. With `byte_level`, words arrive as raw bytes and each
  // byte stands for its ByteLevel character (the vocabulary holds those characters). Refuses,
  // naming the key, dropout, continuing_subword_prefix and end_of_word_suffix, a merge of tokens
  // outside the vocabulary, and any model type but "BPE".
  static Result<Bpe> parse(const nlohmann::json& model, bool byte_level, const std::string& path);

  // Appends the ids of `word` (non-empty, valid UTF-8) to `out`.
  void encode_word(std::string_view word, BpeScratch& scratch, std::vector<uint32_t>& out) const;

  // The model's token -> id and id -> token (an id the vocabulary skips has an empty token).
  std::optional<uint32_t> token_to_id(std::string_view token) const;
  const std::vector<std::string>& tokens() const { return id_to_token_; }

 private:
  Bpe() = default;
  void initial_symbols(std::string_view word, BpeScratch& scratch) const;
  void merge_all(BpeScratch& scratch) const;
  std::optional<uint32_t> symbol_id(std::string_view piece) const;

  StringMap<uint32_t> vocab_;
  std::vector<std::string> id_to_token_;
  PairMap merges_;
  std::optional<uint32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool byte_level_ = false;
  std::array<int64_t, 256> byte_fallback_ids_{};  // <0xNN> -> id, -1 when absent
  std::array<int64_t, 256> byte_symbol_ids_{};    // byte_level: the id of each byte's character, -1 when absent
  StringMap<uint32_t> raw_vocab_;                 // byte_level: raw bytes of a token -> id (for ignore_merges)
};

}  // namespace tierzero::text::internal
