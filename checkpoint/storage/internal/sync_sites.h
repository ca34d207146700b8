// Private: the commit protocol's sync sites, each by name, so a test can remove any single one
// (testing/skip_sync.h) and show that some crash test then fails (benchmarks/RELIABILITY.md).
#pragma once

#include <array>

namespace tierzero::checkpoint {

enum class SyncSite : unsigned {
  kStreamedFile,    // StreamWriter::finish: fdatasync of a streamed file (rank_R.bin, *.safetensors)
  kStagedFile,      // CommitTransaction::write_file: fsync of a small staged file (json, config)
  kStagingDir,      // publish: fsync DIR/NAME.partial before the rename
  kPublishedEntry,  // publish: fsync DIR after renaming NAME.partial to NAME
  kPointerFile,     // publish_pointer: fsync DIR/latest.partial
  kPointerEntry,    // publish_pointer: fsync DIR after renaming it to DIR/latest
  kCreatedDir,      // begin: fsync DIR's parent after creating DIR
  kMovedData,       // move_files_into: fsync DIR after moving the data files in
  kMovedLast,       // move_files_into: fsync DIR after moving the files that complete the set
};
inline constexpr std::array kAllSyncSites = {SyncSite::kStreamedFile,   SyncSite::kStagedFile,  SyncSite::kStagingDir,
                                             SyncSite::kPublishedEntry, SyncSite::kPointerFile, SyncSite::kPointerEntry,
                                             SyncSite::kCreatedDir,     SyncSite::kMovedData,   SyncSite::kMovedLast};

// "streamed-file", "staged-file", ...
const char* sync_site_name(SyncSite site);
// True unless a test removed `site` (testing/skip_sync.h).
bool sync_enabled(SyncSite site);

}  // namespace tierzero::checkpoint
