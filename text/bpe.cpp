// BPE word encoding, the same algorithm as tokenizers' models/bpe (merge_word, Word::merge_all).
#include <algorithm>
#include <cstdio>

#include "text/internal/bpe.h"
#include "text/internal/byte_level.h"
#include "text/internal/utf8.h"

namespace tierzero::text::internal {
namespace {

constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheIds = size_t{1} << 22;

bool optional_flag(const nlohmann::json& model, const char* key) {
  const auto it = model.find(key);
  return it != model.end() && !it->is_null() && it->get<bool>();
}

// The "a b" or ["a", "b"] merge at `index` of model.merges.
Result<std::pair<std::string, std::string>> merge_pair(const nlohmann::json& merge, size_t index,
                                                       const std::string& path) {
  if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string())
    return std::pair{merge[0].get<std::string>(), merge[1].get<std::string>()};
  if (merge.is_string()) {
    const std::string& s = merge.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space != std::string::npos && s.find(' ', space + 1) == std::string::npos)
      return std::pair{s.substr(0, space), s.substr(space + 1)};
  }
  return corrupt(path + ": model.merges[" + std::to_string(index) + "] is " + merge.dump() +
                 ", not \"left right\" or [\"left\", \"right\"]: the file is damaged or not a BPE tokenizer.json");
}

}  // namespace

Result<Bpe> Bpe::parse(const nlohmann::json& model, bool byte_level, const std::string& path) {
  const std::string type = model.contains("type") ? model.at("type").get<std::string>() : "BPE";
  if (type != "BPE") {
    return unsupported(path + ": model type \"" + type + "\" is not supported (supported: BPE)");
  }
  if (model.contains("dropout") && !model.at("dropout").is_null() && model.at("dropout").get<double>() != 0.0) {
    return unsupported(path + ": model.dropout " + model.at("dropout").dump() +
                       " is not supported (BPE dropout is for training-time augmentation; set it to null)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model.at(key).is_null() && !model.at(key).get<std::string>().empty()) {
      return unsupported(path + ": model." + key + " " + model.at(key).dump() +
                         " is not supported (only the byte-level and SentencePiece BPE of Llama / Qwen2 / Mistral)");
    }
  }
  Bpe bpe;
  bpe.byte_level_ = byte_level;
  bpe.fuse_unk_ = optional_flag(model, "fuse_unk");
  bpe.byte_fallback_ = optional_flag(model, "byte_fallback");
  bpe.ignore_merges_ = optional_flag(model, "ignore_merges");
  const nlohmann::json& vocab = model.at("vocab");
  if (!vocab.is_object()) return corrupt(path + ": model.vocab is not an object of token -> id");
  bpe.vocab_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    const auto id = id_json.get<uint32_t>();
    bpe.vocab_.emplace(token, id);
    if (id >= bpe.id_to_token_.size()) bpe.id_to_token_.resize(size_t{id} + 1);
    bpe.id_to_token_[id] = token;
  }
  if (model.contains("unk_token") && !model.at("unk_token").is_null()) {
    const auto unk = model.at("unk_token").get<std::string>();
    bpe.unk_id_ = bpe.token_to_id(unk);
    if (!bpe.unk_id_) return corrupt(path + ": model.unk_token \"" + unk + "\" is not in model.vocab");
  }
  for (unsigned b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto fallback = bpe.token_to_id(name);
    bpe.byte_fallback_ids_[b] = fallback ? int64_t{*fallback} : -1;
    const auto symbol = bpe.token_to_id(byte_level_char(static_cast<uint8_t>(b)));
    bpe.byte_symbol_ids_[b] = symbol ? int64_t{*symbol} : -1;
  }
  if (byte_level) {
    for (const auto& [token, id] : bpe.vocab_) {
      if (auto raw = byte_level_to_bytes(token)) bpe.raw_vocab_.emplace(std::move(*raw), id);
    }
  }
  const nlohmann::json& merges = model.at("merges");
  bpe.merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    TZ_ASSIGN_OR_RETURN(auto pair, merge_pair(merges[i], i, path));
    const auto left = bpe.token_to_id(pair.first), right = bpe.token_to_id(pair.second);
    const auto merged = bpe.token_to_id(pair.first + pair.second);
    if (!left || !right || !merged) {
      return corrupt(path + ": model.merges[" + std::to_string(i) + "] (\"" + pair.first + "\", \"" + pair.second +
                     "\") names a token that is not in model.vocab: the file is damaged");
    }
    bpe.merges_.insert(*left, *right, Merge{static_cast<uint32_t>(i), *merged});
  }
  return bpe;
}

std::optional<uint32_t> Bpe::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Bpe::symbol_id(std::string_view piece) const {
  if (byte_level_) {
    const int64_t id = byte_symbol_ids_[static_cast<uint8_t>(piece[0])];
    return id < 0 ? std::nullopt : std::optional<uint32_t>(static_cast<uint32_t>(id));
  }
  return token_to_id(piece);
}

void Bpe::initial_symbols(std::string_view word, BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  symbols.clear();
  const auto add = [&](uint32_t id) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, true});
  };
  int64_t pending_unk = -1;  // an unk id not yet added (it may still be fused with the next)
  for (size_t i = 0; i < word.size();) {
    const size_t n = byte_level_ ? 1 : sequence_length(static_cast<unsigned char>(word[i]));
    const std::string_view piece = word.substr(i, n);
    i += n;
    if (const auto id = symbol_id(piece)) {
      if (pending_unk >= 0) add(static_cast<uint32_t>(pending_unk));
      pending_unk = -1;
      add(*id);
      continue;
    }
    // The character's own bytes (its ByteLevel character's, for byte-level words).
    const std::string_view bytes =
        byte_level_ ? std::string_view(byte_level_char(static_cast<uint8_t>(piece[0]))) : piece;
    if (byte_fallback_ && std::all_of(bytes.begin(), bytes.end(),
                                      [&](char c) { return byte_fallback_ids_[static_cast<uint8_t>(c)] >= 0; })) {
      for (char c : bytes) add(static_cast<uint32_t>(byte_fallback_ids_[static_cast<uint8_t>(c)]));
      continue;  // as tokenizers does, a pending unk waits (it lands after these bytes)
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(static_cast<uint32_t>(pending_unk));
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(static_cast<uint32_t>(pending_unk));
  if (!symbols.empty()) symbols.back().next = -1;
}

void Bpe::merge_all(BpeScratch& scratch) const {
  auto& symbols = scratch.symbols;
  auto& heap = scratch.heap;
  // A min-heap on (rank, pos): the lowest rank first, the leftmost of equal ranks first.
  const auto later = [](const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  const auto push = [&](uint32_t pos, const Merge& m) {
    heap.push_back({m.rank, pos, m.new_id});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  heap.clear();
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = merges_.find(symbols[i].id, symbols[i + 1].id))
      heap.push_back({m->rank, static_cast<uint32_t>(i), m->new_id});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::Candidate top = heap.back();
    heap.pop_back();
    BpeScratch::Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    BpeScratch::Symbol& right = symbols[static_cast<size_t>(left.next)];
    const Merge* m = merges_.find(left.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // a stale entry: the pair has changed
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = static_cast<int32_t>(top.pos);
    if (left.prev >= 0) {
      if (const Merge* p = merges_.find(symbols[static_cast<size_t>(left.prev)].id, left.id))
        push(static_cast<uint32_t>(left.prev), *p);
    }
    if (left.next >= 0) {
      if (const Merge* n = merges_.find(left.id, symbols[static_cast<size_t>(left.next)].id)) push(top.pos, *n);
    }
  }
}

void Bpe::encode_word(std::string_view word, BpeScratch& scratch, std::vector<uint32_t>& out) const {
  if (ignore_merges_) {
    const auto& whole_words = byte_level_ ? raw_vocab_ : vocab_;
    if (const auto it = whole_words.find(word); it != whole_words.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (const auto hit = scratch.cache.find(word); hit != scratch.cache.end()) {
    const auto [offset, count] = hit->second;
    out.insert(out.end(), scratch.cache_ids.begin() + offset, scratch.cache_ids.begin() + offset + count);
    return;
  }
  initial_symbols(word, scratch);
  merge_all(scratch);
  const size_t first = out.size();
  for (const auto& s : scratch.symbols) {
    if (s.alive) out.push_back(s.id);
  }
  if (word.size() < kMaxCachedWordBytes) {
    if (scratch.cache_ids.size() > kMaxCacheIds) {
      scratch.cache.clear();
      scratch.cache_ids.clear();
    }
    const auto offset = static_cast<uint32_t>(scratch.cache_ids.size());
    scratch.cache_ids.insert(scratch.cache_ids.end(), out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    scratch.cache.emplace(std::string(word), std::pair{offset, static_cast<uint32_t>(out.size() - first)});
  }
}

}  // namespace tierzero::text::internal
