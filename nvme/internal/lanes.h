// The backends, each as a factory of lanes (see piece_queue.h).
#pragma once

#include <memory>

#include "nvme/internal/buffer_registry.h"
#include "nvme/internal/piece_queue.h"
#include "nvme/io_engine.h"

namespace tierzero::nvme {

// A lane of `config.queue_depth` threads running pread/pwrite. Never fails.
std::unique_ptr<Lane> make_sync_lane(const IoConfig& config);

// A lane owning one io_uring ring of `config.queue_depth` entries. With `config.register_buffers`
// it mirrors `buffers` as fixed buffers and registers the files it touches, where the kernel
// can (5.19+). Errors name the liburing call and errno text.
Result<std::unique_ptr<Lane>> make_uring_lane(const IoConfig& config, BufferRegistry& buffers);

// A lane owning one libaio context of `config.queue_depth` events. Errors name io_setup and the
// errno text (e.g. "increase /proc/sys/fs/aio-max-nr").
Result<std::unique_ptr<Lane>> make_aio_lane(const IoConfig& config);

}  // namespace tierzero::nvme
