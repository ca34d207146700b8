// The added-token index: per first byte, the candidate tokens longest first.
#include <algorithm>

#include "text/internal/added_tokens.h"

namespace tierzero::text::internal {

void AddedTokenMatcher::add(std::string content, uint32_t id) { tokens_.push_back({std::move(content), id}); }

void AddedTokenMatcher::finish() {
  for (auto& list : by_first_byte_) list.clear();
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(),
                     [&](uint32_t a, uint32_t b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

}  // namespace tierzero::text::internal
