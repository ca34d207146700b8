#include <algorithm>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {

Result<std::unique_ptr<WriteBuffers>> WriteBuffers::create(uint64_t write_behind_bytes, uint64_t buffer_bytes) {
  if (buffer_bytes == 0 || buffer_bytes % 4096 != 0)
    return invalid_argument(fmt::format("write-behind buffers of {} bytes: give a nonzero multiple of 4096", buffer_bytes));
  const uint64_t count = std::max<uint64_t>(kMinBuffers, (write_behind_bytes + buffer_bytes - 1) / buffer_bytes);
  auto buffers = std::make_unique<WriteBuffers>();
  buffers->buffer_bytes_ = buffer_bytes;
  try {
    for (uint64_t i = 0; i < count; ++i) {
      buffers->buffers_.push_back(nvme::allocate_aligned(buffer_bytes));
      std::memset(buffers->buffers_.back().get(), 0, buffer_bytes);  // faulted in now, not during a save
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted(fmt::format(
        "cannot allocate {} checkpoint write-behind buffers of {} bytes (tierzero.checkpoint.write_behind {} bytes); "
        "give a smaller tierzero.checkpoint.write_behind, or 0 to write at the disk's rate",
        count, buffer_bytes, write_behind_bytes));
  }
  return buffers;
}

}  // namespace tierzero::checkpoint
