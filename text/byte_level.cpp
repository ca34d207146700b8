// The byte-to-unicode map of GPT-2 (and every byte-level BPE since).
#include <unordered_map>

#include "text/internal/byte_level.h"
#include "text/internal/utf8.h"

namespace tierzero::text::internal {
namespace {

struct ByteLevelTables {
  std::array<std::string, 256> to_char;
  std::unordered_map<char32_t, uint8_t> to_byte;

  ByteLevelTables() {
    const auto printable = [](unsigned b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t cp = printable(b) ? b : next++;
      append_utf8(to_char[b], cp);
      to_byte.emplace(cp, static_cast<uint8_t>(b));
    }
  }
};

const ByteLevelTables& tables() {
  static const ByteLevelTables t;
  return t;
}

}  // namespace

const std::string& byte_level_char(uint8_t byte) { return tables().to_char[byte]; }

std::optional<std::string> byte_level_to_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    const auto it = tables().to_byte.find(next_code_point(token, i));
    if (it == tables().to_byte.end()) return std::nullopt;
    bytes += static_cast<char>(it->second);
  }
  return bytes;
}

}  // namespace tierzero::text::internal
