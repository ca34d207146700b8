// Private: finding a checkpoint's tag directory from DIR and an optional tag.
#pragma once

#include <string>

#include "common/common.h"

namespace tierzero::checkpoint {

struct CheckpointLocation {
  std::string path;  // DIR/TAG, or DIR itself when it is a tag directory
  std::string tag;
};

// With a tag: DIR/TAG. Without: the tag named in DIR/latest (whitespace trimmed), or DIR itself
// when DIR holds a manifest.json. Errors name DIR/latest and suggest --tag.
Result<CheckpointLocation> locate_checkpoint(const std::string& dir, const std::string& tag);

}  // namespace tierzero::checkpoint
