// The tokenizer's lookup tables: string keys found by std::string_view without a copy, and an
// open-addressing map from a pair of token ids to its merge (the BPE inner loop's only lookup).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <xxhash.h>

namespace tierzero::text::internal {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return XXH3_64bits(s.data(), s.size()); }
};

// std::string -> V, looked up by string_view.
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

// The merge of a pair of adjacent symbols: its priority (lower merges first) and the new token.
struct Merge {
  uint32_t rank;
  uint32_t new_id;
};

// (left id, right id) -> Merge, linear probing in a power-of-two table at most half full.
class PairMap {
 public:
  // Sizes the table for `count` pairs; call before insert().
  void reserve(size_t count) {
    size_t capacity = 16;
    shift_ = 60;
    while (capacity < 2 * count) capacity *= 2, --shift_;
    slots_.assign(capacity, Slot{kEmpty, {}});
    mask_ = capacity - 1;
  }
  // Inserts the pair; a pair listed twice keeps its last merge, as tokenizers' HashMap does.
  void insert(uint32_t left, uint32_t right, Merge merge) {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key || slots_[i].key == kEmpty) {
        slots_[i] = Slot{key, merge};
        return;
      }
    }
  }
  // The merge of (left, right), or nullptr.
  const Merge* find(uint32_t left, uint32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i].value;
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key;
    Merge value;
  };
  static uint64_t pack(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }
  // Fibonacci hashing: the top bits of key * 2^64/phi.
  size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 60;
};

}  // namespace tierzero::text::internal
