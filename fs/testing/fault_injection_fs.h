// Testing only: a FileSystem double that simulates power loss and fails single calls, in the
// manner of RocksDB's FaultInjectionTestFS and SQLite's crash VFS.
//
// It passes every call to a real FileSystem and keeps, beside the real tree under `root`, the
// durable image of that tree — what a power loss would leave:
//   - a file's bytes as they were at its last sync() (snapshotted then: nvme writes on io_file()
//     go straight to the descriptor, so writes themselves are never seen), empty if never synced;
//   - a directory's entries as they were at its last sync_dir(); creates, renames and removals
//     since then are pending. Whatever was under `root` at construction counts as durable.
// After a (simulated) crash, restore_image() rewrites the real tree under `root` to the image —
// unsynced writes, renames and new entries dropped — or to the image plus any one pending
// directory change (file systems may persist unsynced metadata in any order).
//
// Steps are the calls that can change durable state: create, append, truncate, sync, rename,
// sync_dir, make_dir, remove_file, remove_tree. crash_at(k) lets steps 0..k-1 run and fails step k
// and every call after it; fail_step(k) fails step k alone with an injected error;
// fail_paths_containing() fails every step on some paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fs/file_system.h"

namespace tierzero::fs::testing {

class DurableImage;

struct FsStep {
  std::string op;    // "create", "append", "truncate", "sync", "rename", "sync_dir", "make_dir", ...
  std::string path;  // the path acted on ("from -> to" for rename)
};

class FaultInjectionFs final : public FileSystem {
 public:
  // Wraps `base` (which must outlive this); takes the tree under directory `root` as durable.
  FaultInjectionFs(FileSystem& base, const std::string& root);
  ~FaultInjectionFs() override;

  // The steps run (or attempted) so far, in order.
  std::vector<FsStep> steps() const;
  // Step `k` (0-based, counted from construction) fails with an injected kIo error naming it.
  void fail_step(size_t k);
  // Power is lost just before step `k`: it and every later call fail with kIo "simulated power loss".
  void crash_at(size_t k);
  // Every later step on a path containing `fragment` fails with `error`'s code and message (the
  // step's op and path appended) — a disk that is full, or broken, under one directory — until
  // called again (an empty `fragment` fails nothing).
  void fail_paths_containing(const std::string& fragment, Status error);
  // True once a crash_at() step was reached.
  bool crashed() const;
  // How many distinct images a power loss now may leave: 1 + the pending directory changes.
  size_t image_count() const;
  // Rewrites the real tree under `root` to image `i` (0: every unsynced change dropped; i > 0:
  // also pending directory change i - 1 persisted). Use the real file system afterwards, not this.
  Status restore_image(size_t i);

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

  // For the double's files: begins step `op` on `path` (ok, an injected fault, or the crash).
  Status begin_step(const std::string& op, const std::string& path);
  // Fails when power was lost (any call, step or not).
  Status check_power() const;
  // Records the durable content of file `id` (its sync succeeded).
  void file_synced(uint64_t id, std::string content);

 private:
  FileSystem& base_;
  std::string root_;
  mutable std::mutex mu_;
  std::vector<FsStep> steps_;
  std::optional<size_t> fail_at_;
  std::optional<size_t> crash_at_;
  std::string failing_fragment_;
  Status failing_error_;
  bool crashed_ = false;
  std::unique_ptr<DurableImage> image_;
};

}  // namespace tierzero::fs::testing
