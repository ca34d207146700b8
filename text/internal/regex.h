// A compiled PCRE2 pattern (UTF + UCP, JIT when available) for the Split pre-tokenizer: Hugging
// Face `tokenizers` compiles these with Oniguruma; PCRE2 with UCP gives \p{L}, \p{N}, \s and
// case-insensitive groups the same Unicode meaning. Safe to use from many threads at once.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <string>
#include <string_view>

#include <tbb/enumerable_thread_specific.h>

#include "common/common.h"

namespace tierzero::text::internal {

class Regex {
 public:
  // Compiles `pattern` (taken literally when `literal`); the error names `where` and the offset.
  static Result<std::unique_ptr<Regex>> compile(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for each non-overlapping match in `text` (valid UTF-8), left to
  // right. Matching errors (the JIT stack limit) come back as kInternal naming the offset.
  template <typename OnMatch>
  Status for_each_match(std::string_view text, OnMatch&& on_match) const {
    MatchState& state = states_.local();
    size_t from = 0;
    while (from <= text.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), from,
                                 PCRE2_NO_UTF_CHECK, state.data, state.context);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) return match_error(rc, from);
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
      const size_t begin = ovector[0], end = ovector[1];
      if (end > begin) on_match(begin, end);
      from = end > begin ? end : next_char(text, end);
    }
    return {};
  }

 private:
  struct MatchState {
    explicit MatchState(const pcre2_code* code);
    ~MatchState();
    MatchState(const MatchState&) = delete;
    MatchState& operator=(const MatchState&) = delete;
    pcre2_match_data* data = nullptr;
    pcre2_match_context* context = nullptr;
    pcre2_jit_stack* jit_stack = nullptr;
  };
  explicit Regex(pcre2_code* code);
  static size_t next_char(std::string_view text, size_t at);
  Status match_error(int rc, size_t from) const;

  pcre2_code* code_;
  std::string where_;
  mutable tbb::enumerable_thread_specific<MatchState> states_;
};

}  // namespace tierzero::text::internal
