// UTF-8 helpers for the tokenizer: validation, code points, and lossy decoding as Rust's
// String::from_utf8_lossy does it (what Hugging Face `tokenizers` decoders produce).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tierzero::text::internal {

// Length of the valid UTF-8 sequence at s[i], or 0 when s[i..] does not start with one (overlong
// forms, surrogates and code points above U+10FFFF are invalid). Requires i < s.size().
size_t valid_sequence_length(std::string_view s, size_t i);

// Byte offset of the first invalid UTF-8 sequence in `s`, or std::string_view::npos when valid.
size_t find_invalid_utf8(std::string_view s);

// Length of the sequence whose lead byte is `lead`, for text already known to be valid.
inline size_t sequence_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// Decodes the code point at s[i] of valid UTF-8 and advances i past it.
char32_t next_code_point(std::string_view s, size_t& i);

// Appends code point `cp` (<= U+10FFFF, not a surrogate) as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// Appends `bytes`, replacing each maximal invalid subsequence with U+FFFD.
void append_lossy_utf8(std::string& out, std::string_view bytes);

}  // namespace tierzero::text::internal
