#include "checkpoint/engine_format/internal/reader_paths.h"

#include <filesystem>

#include <fmt/format.h>

#include "checkpoint/engine_format/internal/manifest_io.h"

namespace tierzero::checkpoint {

Result<CheckpointLocation> locate_checkpoint(const std::string& dir, const std::string& tag) {
  if (!tag.empty()) return CheckpointLocation{dir + "/" + tag, tag};
  const std::string latest_path = dir + "/" + kLatestFile;
  auto latest = read_text_file(latest_path);
  if (!latest.ok()) {
    if (std::filesystem::exists(dir + "/" + kManifestFile)) {
      return CheckpointLocation{dir, std::filesystem::path(dir).filename().string()};
    }
    return not_found(
        fmt::format("{} does not exist: {} holds no committed checkpoint (pass --tag to name one)", latest_path, dir));
  }
  std::string name = *latest;
  const auto first = name.find_first_not_of(" \t\r\n");
  const auto last = name.find_last_not_of(" \t\r\n");
  name = first == std::string::npos ? "" : name.substr(first, last - first + 1);
  if (name.empty() || name.find('/') != std::string::npos) {
    return corrupt(fmt::format("{} holds '{}', not a tag name; pass --tag to choose a checkpoint", latest_path, name));
  }
  return CheckpointLocation{dir + "/" + name, name};
}

}  // namespace tierzero::checkpoint
