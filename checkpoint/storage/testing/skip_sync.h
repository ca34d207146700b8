// Testing only: removes one sync site of the commit protocol for a scope, to show that a crash
// test then fails (the sites: internal/sync_sites.h; the record: benchmarks/RELIABILITY.md).
#pragma once

#include "checkpoint/storage/internal/sync_sites.h"

namespace tierzero::checkpoint::testing {

class ScopedSkipSync {
 public:
  // Until destruction, the protocol skips the fsync / directory sync at `site` (process-wide).
  explicit ScopedSkipSync(SyncSite site);
  // Puts the sync back.
  ~ScopedSkipSync();
  ScopedSkipSync(const ScopedSkipSync&) = delete;
  ScopedSkipSync& operator=(const ScopedSkipSync&) = delete;

 private:
  SyncSite site_;
};

}  // namespace tierzero::checkpoint::testing
