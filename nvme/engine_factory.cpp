// IoEngine::create: picks and builds a backend, falling back under `auto`.
#include <liburing.h>

#include <cstdio>
#include <mutex>

#include "nvme/internal/lane_engine.h"
#include "nvme/internal/lanes.h"

namespace tierzero::nvme {

namespace {

// Whether io_uring works here, not just exists: sandboxes (gVisor, seccomp) may refuse setup or
// the read/write opcodes. Returns the reason when it does not.
Status probe_io_uring() {
  io_uring ring{};
  if (int r = io_uring_queue_init(2, &ring, 0); r < 0) return errno_status(-r, "io_uring_queue_init");
  Status verdict;
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  if (probe == nullptr || !io_uring_opcode_supported(probe, IORING_OP_READ) ||
      !io_uring_opcode_supported(probe, IORING_OP_WRITE)) {
    verdict = unsupported("io_uring lacks the READ/WRITE opcodes (kernel older than 5.6 or a sandbox)");
  } else {
    io_uring_prep_nop(io_uring_get_sqe(&ring));
    io_uring_cqe* cqe = nullptr;
    int r = io_uring_submit_and_wait(&ring, 1);
    if (r >= 0) r = io_uring_wait_cqe(&ring, &cqe);
    if (r < 0)
      verdict = errno_status(-r, "io_uring_submit (NOP probe)");
    else if (cqe->res < 0)
      verdict = errno_status(-cqe->res, "io_uring NOP probe");
  }
  if (probe != nullptr) io_uring_free_probe(probe);
  io_uring_queue_exit(&ring);
  return verdict;
}

Result<std::unique_ptr<Lane>> make_lane(Backend backend, const IoConfig& config, LaneEngine& engine) {
  switch (backend) {
    case Backend::kIoUring: return make_uring_lane(config, engine.buffers());
    case Backend::kLibaio: return make_aio_lane(config);
    default: return make_sync_lane(config);
  }
}

Result<std::unique_ptr<IoEngine>> build(Backend backend, const IoConfig& config) {
  if (backend == Backend::kIoUring) TZ_RETURN_IF_ERROR(probe_io_uring());
  auto engine = std::make_unique<LaneEngine>(config, backend);
  for (uint32_t i = 0; i < config.intra_op_parallelism; ++i) {
    TZ_ASSIGN_OR_RETURN(std::unique_ptr<Lane> lane, make_lane(backend, config, *engine));
    engine->add_lane(std::move(lane));
  }
  return std::unique_ptr<IoEngine>(std::move(engine));
}

void tell_auto_choice_once(Backend chosen, const std::string& why_not_better) {
  static std::once_flag told;
  std::call_once(told, [&] {
    std::fprintf(stderr, "tierzero: nvme: I/O backend %s (auto)%s\n", backend_name(chosen), why_not_better.c_str());
  });
}

}  // namespace

Result<std::unique_ptr<IoEngine>> IoEngine::create(const IoConfig& config) {
  TZ_RETURN_IF_ERROR(validate(config));
  if (config.backend != Backend::kAuto) {
    Result<std::unique_ptr<IoEngine>> engine = build(config.backend, config);
    if (!engine.ok()) {
      return engine.status().with_context(std::string("the ") + backend_name(config.backend) +
                                          " I/O backend is not available here (choose aio.backend auto or sync)");
    }
    return engine;
  }
  std::string skipped;
  for (Backend candidate : {Backend::kIoUring, Backend::kLibaio, Backend::kSync}) {
    Result<std::unique_ptr<IoEngine>> engine = build(candidate, config);
    if (engine.ok()) {
      tell_auto_choice_once(candidate, skipped);
      return engine;
    }
    skipped += std::string("; ") + backend_name(candidate) + " unavailable: " + engine.status().message();
  }
  return internal_error("no I/O backend could be built" + skipped);
}

}  // namespace tierzero::nvme
