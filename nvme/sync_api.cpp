// read_sync / write_sync: one request, waited for.
#include "nvme/io_engine.h"

namespace tierzero::nvme {

Status read_sync(IoEngine& engine, const FileRef& file, uint64_t offset, void* buffer, uint64_t length) {
  return engine.submit(IoRequest{file, Op::kRead, offset, buffer, length, false}).wait();
}

Status write_sync(IoEngine& engine, const FileRef& file, uint64_t offset, const void* buffer, uint64_t length,
                  bool sync_after) {
  return engine.submit(IoRequest{file, Op::kWrite, offset, const_cast<void*>(buffer), length, sync_after}).wait();
}

}  // namespace tierzero::nvme
