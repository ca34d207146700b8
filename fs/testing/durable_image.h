// Testing only (FaultInjectionFs's model): what a power loss would leave of the tree under a root.
// Nodes are identified by ids the model hands out (inode numbers are reused, ids are not); the
// real tree's inode numbers map to them while the inodes live.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/common.h"

namespace tierzero::fs::testing {

class DurableImage {
 public:
  // Takes everything under directory `root` as durable (content and entries as they are now).
  explicit DurableImage(std::string root);

  // `path` was just created (a new file, or truncated when `existed`); returns its id.
  uint64_t created(const std::string& path, bool existed);
  // Directory `path` was just made.
  void made_dir(const std::string& path);
  // File `id`'s sync succeeded with `content` on disk.
  void file_synced(uint64_t id, std::string content);
  // Directory `dir` was fsynced: its current entries are durable.
  void dir_synced(const std::string& dir);
  // `from` is about to be renamed to `to`.
  void renaming(const std::string& from, const std::string& to);
  // `path` (and, for a directory, everything under it) is about to be removed.
  void removing(const std::string& path);

  // 1 + the number of pending directory changes.
  size_t image_count() const { return 1 + pending_.size(); }
  // Replaces the tree under the root with image `i` (see FaultInjectionFs::restore_image).
  Status restore(size_t i) const;

 private:
  struct Node {
    bool is_dir = false;
    std::string data;                         // files: durable bytes
    std::map<std::string, uint64_t> entries;  // directories: durable entries
  };
  struct Edit {
    uint64_t dir;
    std::string name;
    std::optional<uint64_t> child;  // nullopt: the entry is removed
  };
  using Change = std::vector<Edit>;  // one rename / create / remove

  // The id of what `path` is now (a fresh one for an inode not seen yet); nullopt when missing
  // or outside the root.
  std::optional<uint64_t> id_of(const std::string& path);
  uint64_t fresh(bool is_dir, ino_t ino);
  void scan(const std::string& dir, uint64_t id);
  // Entry `name` of `parent_path` changes to `child` (pending until the parent is synced).
  void pending_edit(Change& change, const std::string& path, std::optional<uint64_t> child);
  Status write_node(const std::string& path, uint64_t id, const Change* extra, int depth) const;

  std::string root_;
  uint64_t root_id_ = 0;
  uint64_t next_id_ = 1;
  std::map<ino_t, uint64_t> ids_;
  std::map<uint64_t, Node> nodes_;
  std::vector<Change> pending_;
};

}  // namespace tierzero::fs::testing
