// The "normalizer" of a tokenizer.json: null, NFC (Qwen2), Prepend and Replace with a string
// pattern (Llama 2's Sequence[Prepend("▁"), Replace(" ", "▁")]), or a Sequence of those.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::text::internal {

class Normalizer {
 public:
  // Reads the normalizer object (null: none). Any other type is refused by name.
  static Result<Normalizer> parse(const nlohmann::json& spec, const std::string& path);

  // True when there is nothing to do.
  bool empty() const { return steps_.empty(); }
  // Returns `text` normalized: `text` itself when no step changes it, else a view of `storage`.
  // `text` is valid UTF-8 and must not point into `storage`.
  std::string_view apply(std::string_view text, std::string& storage) const;

 private:
  enum class Kind { kNfc, kPrepend, kReplace };
  struct Step {
    Kind kind;
    std::string pattern;  // Replace: what is replaced
    std::string content;  // Prepend: the prefix; Replace: the replacement
  };
  static Status add(const nlohmann::json& spec, const std::string& path, std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace tierzero::text::internal
