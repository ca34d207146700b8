// The "aio" block (DeepSpeed's aio_config.py keys and defaults) mapped 1:1 onto
// nvme::IoConfig, plus tierzero's backend / use_direct / register_buffers. The checks follow
// nvme::validate()'s contract (nonzero sizes, block_size a power of two >= 512).
#include <bit>
#include <string>

#include "engine/config/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

Result<nvme::Backend> read_backend(JsonFields& f) {
  std::string name = "auto";
  TZ_RETURN_IF_ERROR(f.read_string("backend", &name));
  if (name == "auto") return nvme::Backend::kAuto;
  if (name == "io_uring") return nvme::Backend::kIoUring;
  if (name == "libaio") return nvme::Backend::kLibaio;
  if (name == "sync") return nvme::Backend::kSync;
  return invalid_argument(f.path_of("backend") + " must be \"auto\", \"io_uring\", \"libaio\" or \"sync\", got \"" +
                          name + "\"");
}

}  // namespace

Status parse_aio(JsonFields& root, nvme::IoConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields f, root.child("aio"));
  TZ_ASSIGN_OR_RETURN(out->backend, read_backend(f));
  TZ_RETURN_IF_ERROR(f.read_bytes("block_size", &out->block_size));
  if (out->block_size < 512 || !std::has_single_bit(out->block_size)) {
    return invalid_argument(f.path_of("block_size") + " must be a power of two >= 512 bytes, got " +
                            std::to_string(out->block_size) + " (DeepSpeed's default is 1048576)");
  }
  int64_t queue_depth = out->queue_depth;
  TZ_RETURN_IF_ERROR(f.read_int("queue_depth", &queue_depth, 1, 65536));
  out->queue_depth = static_cast<uint32_t>(queue_depth);
  // DeepSpeed's older name for intra_op_parallelism.
  if (f.has("thread_count") && f.has("intra_op_parallelism")) {
    return invalid_argument(f.path_of("thread_count") + " and " + f.path_of("intra_op_parallelism") +
                            " are the same setting; keep intra_op_parallelism");
  }
  int64_t parallelism = out->intra_op_parallelism;
  TZ_RETURN_IF_ERROR(
      f.read_int(f.has("thread_count") ? "thread_count" : "intra_op_parallelism", &parallelism, 1, 1024));
  out->intra_op_parallelism = static_cast<uint32_t>(parallelism);
  TZ_RETURN_IF_ERROR(f.read_bool("single_submit", &out->single_submit));
  TZ_RETURN_IF_ERROR(f.read_bool("overlap_events", &out->overlap_events));
  TZ_RETURN_IF_ERROR(f.read_bool("use_direct", &out->use_direct));
  TZ_RETURN_IF_ERROR(f.read_bool("register_buffers", &out->register_buffers));
  bool use_gds = false;
  TZ_RETURN_IF_ERROR(f.read_bool("use_gds", &use_gds));
  if (use_gds) warnings->push_back(f.path_of("use_gds") + " is not supported (no GPUDirect Storage); ignored");
  f.warn_unused(warnings);
  return {};
}

}  // namespace tierzero::engine::detail
