// The "post_processor" of a tokenizer.json for one sequence: ByteLevel (ids unchanged),
// TemplateProcessing's "single" template (special tokens around $A), or a Sequence of those.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::text::internal {

struct PostProcessor {
  std::vector<uint32_t> prefix;  // ids before the text's
  std::vector<uint32_t> suffix;  // ids after

  // Reads the post_processor object (null: none). Any other type is refused by name.
  static Result<PostProcessor> parse(const nlohmann::json& spec, const std::string& path);
};

}  // namespace tierzero::text::internal
