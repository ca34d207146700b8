// The optimizer's copies into the compute partition that the device's compute stream has not been
// ordered after yet. The offloaded step sends each sub-group's new 16-bit weights to the device on
// a side stream; instead of making the compute stream wait for all of them before the next forward,
// the partitioner orders it after a copy only just before it first reads an overlapping range (a
// unit's parameters, a gather's input), so layer 0's forward can start while the last sub-groups
// are still on their way.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/zero/internal/device_copies.h"

namespace tierzero::engine {

// A copy queued into elements [begin, begin + count) of a compute partition.
struct PartitionWrite {
  int64_t begin = 0;
  int64_t count = 0;
  std::shared_ptr<CopyDone> done;
};

class PendingWrites {
 public:
  // Adds `writes` to those pending.
  void add(std::vector<PartitionWrite> writes);
  // Orders the device's current stream after every pending write overlapping elements [begin, end)
  // (CopyDone::order_current_stream; the host does not wait) and forgets them.
  void order_range(int64_t begin, int64_t end);
  // The same for every pending write.
  void order_all();
  size_t size() const { return writes_.size(); }

 private:
  std::vector<PartitionWrite> writes_;
};

}  // namespace tierzero::engine
