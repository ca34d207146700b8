// PCRE2 patterns for the Split pre-tokenizer, one match context and JIT stack per thread.
#include "text/internal/regex.h"
#include "text/internal/utf8.h"

namespace tierzero::text::internal {
namespace {

constexpr size_t kJitStackBytes = size_t{1} << 20;

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

Regex::MatchState::MatchState(const pcre2_code* code)
    : data(pcre2_match_data_create_from_pattern(code, nullptr)), context(pcre2_match_context_create(nullptr)) {
  jit_stack = pcre2_jit_stack_create(32 * 1024, kJitStackBytes, nullptr);
  if (jit_stack != nullptr) pcre2_jit_stack_assign(context, nullptr, jit_stack);
}

Regex::MatchState::~MatchState() {
  pcre2_match_data_free(data);
  pcre2_match_context_free(context);
  pcre2_jit_stack_free(jit_stack);
}

Regex::Regex(pcre2_code* code) : code_(code), states_(static_cast<const pcre2_code*>(code)) {}

Regex::~Regex() { pcre2_code_free(code_); }

Result<std::unique_ptr<Regex>> Regex::compile(std::string_view pattern, bool literal, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : 0u);
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error, &offset, nullptr);
  if (code == nullptr) {
    return unsupported(where + ": PCRE2 cannot compile the pattern at offset " + std::to_string(offset) + ": " +
                       pcre2_message(error));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // without JIT (an unsupported CPU) pcre2_match interprets
  auto regex = std::unique_ptr<Regex>(new Regex(code));
  regex->where_ = where;
  return regex;
}

size_t Regex::next_char(std::string_view text, size_t at) {
  return at < text.size() ? at + sequence_length(static_cast<unsigned char>(text[at])) : at + 1;
}

Status Regex::match_error(int rc, size_t from) const {
  return internal_error(where_ + ": PCRE2 matching failed at byte " + std::to_string(from) + ": " + pcre2_message(rc));
}

}  // namespace tierzero::text::internal
