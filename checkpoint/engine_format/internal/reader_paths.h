// Private: finding a checkpoint's tag directory from DIR and an optional tag.
#pragma once

#include <string>

#include "common/common.h"

namespace tierzero::checkpoint {

struct CheckpointLocation {
  std::string path;  // DIR/TAG, or DIR itself when it is a tag directory
  std::string tag;
};

// With a tag: DIR/TAG. Without: the tag DIR/latest names, checked against DIR/latest.xxh3 when
// present (latest_pointer.h read_latest_tag), or DIR itself when DIR has no latest but holds a
// manifest.json. Errors name DIR/latest (or latest.xxh3) and suggest --tag.
Result<CheckpointLocation> locate_checkpoint(const std::string& dir, const std::string& tag);

}  // namespace tierzero::checkpoint
