// The sync-site names and the test switch that removes one.
#include "checkpoint/storage/internal/sync_sites.h"

#include <atomic>

#include "checkpoint/storage/testing/skip_sync.h"

namespace tierzero::checkpoint {
namespace {

std::atomic<unsigned> g_skipped{0};  // bit i set: site i skipped

unsigned bit(SyncSite site) { return 1u << static_cast<unsigned>(site); }

}  // namespace

const char* sync_site_name(SyncSite site) {
  switch (site) {
    case SyncSite::kStreamedFile: return "streamed-file";
    case SyncSite::kStagedFile: return "staged-file";
    case SyncSite::kStagingDir: return "staging-dir";
    case SyncSite::kPublishedEntry: return "published-entry";
    case SyncSite::kPointerFile: return "pointer-file";
    case SyncSite::kPointerEntry: return "pointer-entry";
    case SyncSite::kCreatedDir: return "created-dir";
    case SyncSite::kMovedData: return "moved-data";
    case SyncSite::kMovedLast: return "moved-last";
  }
  return "?";
}

bool sync_enabled(SyncSite site) { return (g_skipped.load(std::memory_order_relaxed) & bit(site)) == 0; }

namespace testing {

ScopedSkipSync::ScopedSkipSync(SyncSite site) : site_(site) { g_skipped.fetch_or(bit(site)); }

ScopedSkipSync::~ScopedSkipSync() { g_skipped.fetch_and(~bit(site_)); }

}  // namespace testing
}  // namespace tierzero::checkpoint
