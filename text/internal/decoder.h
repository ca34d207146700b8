// The "decoder" of a tokenizer.json, turning tokens back into text: ByteLevel; Replace (string
// pattern), ByteFallback, Fuse, Strip (Llama 2's Sequence of those four); Metaspace; a Sequence
// of those; null (tokens joined by spaces). Anything else is refused by name.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::text::internal {

class Decoder {
 public:
  static Result<Decoder> parse(const nlohmann::json& spec, const std::string& path);

  // The text of `tokens` (token strings, special ones already left out when asked).
  std::string decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  struct Step {
    Kind kind;
    std::string pattern;         // Replace: what is replaced; Strip, Metaspace: the character
    std::string content;         // Replace: the replacement
    size_t start = 0, stop = 0;  // Strip: how many characters at most to strip at each end
    bool prepend = true;         // Metaspace: prepend_scheme is not "never"
  };
  static Status add(const nlohmann::json& spec, const std::string& path, Decoder& out);
  std::vector<Step> steps_;
  bool none_ = true;
};

}  // namespace tierzero::text::internal
