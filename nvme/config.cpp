// Backend names and IoConfig validation.
#include <string>

#include "nvme/io_engine.h"

namespace tierzero::nvme {

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kIoUring: return "io_uring";
    case Backend::kLibaio: return "libaio";
    case Backend::kSync: return "sync";
  }
  return "unknown";
}

Result<Backend> parse_backend(std::string_view name) {
  for (Backend b : {Backend::kAuto, Backend::kIoUring, Backend::kLibaio, Backend::kSync}) {
    if (name == backend_name(b)) return b;
  }
  return invalid_argument("unknown I/O backend \"" + std::string(name) + "\": use one of auto, io_uring, libaio, sync");
}

Status validate(const IoConfig& config) {
  const uint64_t bs = config.block_size;
  if (bs < 512 || (bs & (bs - 1)) != 0 || bs > (uint64_t{1} << 30)) {
    return invalid_argument("aio.block_size = " + std::to_string(bs) +
                            ": must be a power of two from 512 to 1073741824 bytes");
  }
  if (config.queue_depth < 1 || config.queue_depth > 4096) {
    return invalid_argument("aio.queue_depth = " + std::to_string(config.queue_depth) + ": must be from 1 to 4096");
  }
  if (config.intra_op_parallelism < 1 || config.intra_op_parallelism > 256) {
    return invalid_argument("aio.intra_op_parallelism = " + std::to_string(config.intra_op_parallelism) +
                            ": must be from 1 to 256");
  }
  return {};
}

}  // namespace tierzero::nvme
