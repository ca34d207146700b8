// THE COMMIT PROTOCOL — the one way tierzero makes a set of files durable, shared by engine
// checkpoint save (engine_format/engine_checkpoint_writer.cpp), convert (convert/consolidate.cpp)
// and the 16-bit export (engine/zero/export_16bit.cpp). Every call goes through an fs::FileSystem;
// each sync below is a named site (internal/sync_sites.h) that some crash test needs
// (benchmarks/RELIABILITY.md).
//
// Publishing DIR/NAME (a checkpoint tag, a converted model):
//   1. begin      mkdir DIR if missing, then fsync DIR's parent              [created-dir]
//                 rm -r DIR/NAME.partial (a crashed attempt's); mkdir DIR/NAME.partial
//   2. write      every file into DIR/NAME.partial, each fdatasynced          [streamed-file]
//                 (StreamWriter::finish, big files) or fsynced               [staged-file]
//                 (write_file, small ones), before anything depends on it
//   3. publish    fsync DIR/NAME.partial: its entries are durable            [staging-dir]
//   4.            rm -r DIR/NAME when the caller says it is unpublished (else rename(2) replaces
//                 only an empty directory); rename DIR/NAME.partial -> DIR/NAME
//   5.            fsync DIR: DIR/NAME is durable, and complete               [published-entry]
// Moving a pointer (DIR/latest -> the new tag), the same way:
//   6. write DIR/latest.partial; fsync it                                    [pointer-file]
//      rename DIR/latest.partial -> DIR/latest; fsync DIR                    [pointer-entry]
// Moving a published directory's files into a shared directory (save_16bit_model puts the model
// beside `latest`), data before the files that make the set look complete:
//   7. rename each data file into DIR; fsync DIR                             [moved-data]
//      rename the file a loader follows (the index) into DIR; fsync DIR     [moved-last]
//      rm -r the emptied source directory
//
// What a crash leaves, at any instant (file systems may persist unsynced directory changes in
// any order, so each step's sync orders it before the next): DIR/NAME exists only complete
// (3 before 4); `latest` names only a durable, complete tag (5 before 6); a completing file sits
// only beside durable data files (7). Readers follow only DIR/NAME and DIR/latest; *.partial is
// never read, and the next attempt removes it.
#include <algorithm>

#include <fmt/format.h>

#include "checkpoint/storage/internal/sync_sites.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {
namespace {

// Fsyncs directory `dir` unless a test removed `site`.
Status sync_dir_at(fs::FileSystem& fs, SyncSite site, const std::string& dir) {
  return sync_enabled(site) ? fs.sync_dir(dir) : Status();
}

}  // namespace

CommitTransaction::CommitTransaction(fs::FileSystem& fs, std::string dir, std::string name)
    : fs_(fs), dir_(fs::strip_trailing_slashes(dir)) {
  target_ = dir_ + "/" + name;
  staging_ = target_ + ".partial";
}

Status CommitTransaction::begin() {
  TZ_ASSIGN_OR_RETURN(const bool created, fs_.make_dir(dir_));
  if (created) TZ_RETURN_IF_ERROR(sync_dir_at(fs_, SyncSite::kCreatedDir, fs::parent_dir(dir_)));
  TZ_RETURN_IF_ERROR(fs_.remove_tree(staging_));
  return fs_.make_dir(staging_).status();
}

Status CommitTransaction::write_file(const std::string& file, std::span<const std::byte> bytes) {
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<fs::WritableFile> out, fs_.create(staging_ + "/" + file, fs::WriteOptions{}));
  TZ_RETURN_IF_ERROR(out->append(bytes));
  if (sync_enabled(SyncSite::kStagedFile)) TZ_RETURN_IF_ERROR(out->sync());
  return out->close();
}

Status CommitTransaction::publish(bool replace_tree) {
  TZ_RETURN_IF_ERROR(sync_dir_at(fs_, SyncSite::kStagingDir, staging_));
  if (replace_tree) TZ_RETURN_IF_ERROR(fs_.remove_tree(target_));
  TZ_RETURN_IF_ERROR(fs_.rename(staging_, target_));
  return sync_dir_at(fs_, SyncSite::kPublishedEntry, dir_);
}

Status CommitTransaction::abort() { return fs_.remove_tree(staging_); }

Status publish_pointer(fs::FileSystem& fs, const std::string& dir, const std::string& pointer, std::string_view text) {
  const std::string path = dir + "/" + pointer;
  {
    TZ_ASSIGN_OR_RETURN(std::unique_ptr<fs::WritableFile> out, fs.create(path + ".partial", fs::WriteOptions{}));
    TZ_RETURN_IF_ERROR(out->append(std::as_bytes(std::span(text.data(), text.size()))));
    if (sync_enabled(SyncSite::kPointerFile)) TZ_RETURN_IF_ERROR(out->sync());
    TZ_RETURN_IF_ERROR(out->close());
  }
  TZ_RETURN_IF_ERROR(fs.rename(path + ".partial", path));
  return sync_dir_at(fs, SyncSite::kPointerEntry, dir);
}

Status move_files_into(fs::FileSystem& fs, const std::string& from, const std::string& dir,
                       std::span<const std::string> last) {
  TZ_ASSIGN_OR_RETURN(std::vector<std::string> names, fs.list_dir(from));
  const auto is_last = [&](const std::string& name) { return std::find(last.begin(), last.end(), name) != last.end(); };
  for (const bool completing : {false, true}) {
    for (const std::string& name : names) {
      if (is_last(name) != completing) continue;
      TZ_RETURN_IF_ERROR(fs.rename(from + "/" + name, dir + "/" + name)
                             .with_context(fmt::format("moving the exported files into {}", dir)));
    }
    TZ_RETURN_IF_ERROR(sync_dir_at(fs, completing ? SyncSite::kMovedLast : SyncSite::kMovedData, dir));
  }
  return fs.remove_tree(from);
}

}  // namespace tierzero::checkpoint
