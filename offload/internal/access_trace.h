// The access order of one training step, recorded from fetch() calls and replayed: a cursor
// follows the fetches of later steps, tells the prefetcher what comes next and tells eviction how
// far away each shard's next use is (Belady's rule). Steps repeat, so the trace is cyclic.
// Not thread-safe; the tier manager locks.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "offload/tier_manager.h"

namespace tierzero::offload {

class AccessTrace {
 public:
  struct Entry {
    std::string id;
    Tier tier;
  };
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

  // Discards any trace and starts recording.
  void begin();
  // Stops recording; replay starts at the trace's first entry.
  void end();
  bool replaying() const { return !recording_ && !entries_.empty(); }

  // Records the fetch (while recording) or moves the cursor past the next entry for `id`.
  void on_fetch(const std::string& id, Tier tier);
  // Entries from the cursor on, at most one cycle, stopping before `bytes_of` sums past
  // `max_bytes` (always at least one entry when replaying).
  template <typename BytesOf>
  std::vector<const Entry*> upcoming(uint64_t max_bytes, BytesOf bytes_of) const {
    std::vector<const Entry*> out;
    uint64_t sum = 0;
    for (size_t i = 0; replaying() && i < entries_.size(); ++i) {
      const Entry& e = entries_[(cursor_ + i) % entries_.size()];
      sum += bytes_of(e.id);
      if (!out.empty() && sum > max_bytes) break;
      out.push_back(&e);
    }
    return out;
  }
  // Fetches between the cursor and the next use of `id`; kNever when the trace does not hold
  // it; 0 when it is next. Without a trace, every shard is kNever.
  uint64_t next_use(const std::string& id) const;

 private:
  bool recording_ = false;
  std::vector<Entry> entries_;
  std::unordered_map<std::string, std::vector<uint64_t>> positions_;  // id -> ascending entry indexes
  uint64_t cursor_ = 0;
};

}  // namespace tierzero::offload
