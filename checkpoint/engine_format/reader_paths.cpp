#include "checkpoint/engine_format/internal/reader_paths.h"

#include <filesystem>

#include "checkpoint/engine_format/internal/latest_pointer.h"
#include "checkpoint/engine_format/internal/manifest_io.h"

namespace tierzero::checkpoint {

Result<CheckpointLocation> locate_checkpoint(const std::string& dir, const std::string& tag) {
  if (!tag.empty()) return CheckpointLocation{dir + "/" + tag, tag};
  Result<std::string> latest = read_latest_tag(dir);
  if (!latest.ok()) {
    if (latest.status().code() == ErrorCode::kNotFound && std::filesystem::exists(dir + "/" + kManifestFile)) {
      return CheckpointLocation{dir, std::filesystem::path(dir).filename().string()};
    }
    return latest.status();
  }
  const std::string& name = *latest;
  return CheckpointLocation{dir + "/" + name, name};
}

}  // namespace tierzero::checkpoint
