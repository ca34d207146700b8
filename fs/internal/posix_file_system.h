// Private: the real file system — POSIX calls, and nvme::IoEngine::open for engine files.
#pragma once

#include "fs/file_system.h"

namespace tierzero::fs {

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<WritableFile>> create(const std::string& path, const WriteOptions& options) override;
  Result<std::string> read_file(const std::string& path) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status sync_dir(const std::string& dir) override;
  Result<bool> make_dir(const std::string& dir) override;
  Status remove_file(const std::string& path) override;
  Status remove_tree(const std::string& path) override;
  Result<std::vector<std::string>> list_dir(const std::string& dir) override;
  Result<FileInfo> stat(const std::string& path) override;
  Result<SpaceInfo> free_space(const std::string& path) override;
};

// Creates `path` for writing: through `options.engine` when set (its nvme::File), else a buffered
// descriptor of its own.
Result<std::unique_ptr<WritableFile>> create_posix_file(const std::string& path, const WriteOptions& options);

}  // namespace tierzero::fs
