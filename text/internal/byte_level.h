// GPT-2's byte-to-unicode map that ByteLevel pre-tokenizers and decoders use: every byte becomes
// one printable character ('!'..'~', '¡'..'¬', '®'..'ÿ' stand for themselves; the other 68 bytes
// become U+0100.. in byte order), so a vocabulary of strings can hold arbitrary bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tierzero::text::internal {

// The character (as UTF-8) that stands for `byte`.
const std::string& byte_level_char(uint8_t byte);

// The raw bytes a byte-level token stands for, or nullopt when a character of `token` is not one
// of the 256 (added tokens such as "<|endoftext|>" are made of mapped characters too).
std::optional<std::string> byte_level_to_bytes(std::string_view token);

}  // namespace tierzero::text::internal
