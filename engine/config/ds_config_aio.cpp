// The "aio" block (DeepSpeed's aio_config.py keys and defaults) mapped 1:1 onto
// nvme::IoConfig, plus tierzero's backend / use_direct / register_buffers; nvme::validate() has
// the last word on ranges, so the parser and the I/O engine agree.
#include <cstdint>
#include <string>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {

Status parse_aio(JsonFields& root, nvme::IoConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields f, root.child("aio"));
  std::string backend = nvme::backend_name(out->backend);
  TZ_RETURN_IF_ERROR(f.read_string("backend", &backend));
  Result<nvme::Backend> parsed = nvme::parse_backend(backend);
  if (!parsed.ok()) return parsed.status().with_context(f.path_of("backend"));
  out->backend = *parsed;
  TZ_RETURN_IF_ERROR(f.read_bytes("block_size", &out->block_size));
  int64_t queue_depth = out->queue_depth;
  TZ_RETURN_IF_ERROR(f.read_int("queue_depth", &queue_depth, 1, UINT32_MAX));
  out->queue_depth = static_cast<uint32_t>(queue_depth);
  // DeepSpeed's older name for intra_op_parallelism.
  if (f.has("thread_count") && f.has("intra_op_parallelism")) {
    return invalid_argument(f.path_of("thread_count") + " and " + f.path_of("intra_op_parallelism") +
                            " are the same setting; keep intra_op_parallelism");
  }
  int64_t parallelism = out->intra_op_parallelism;
  TZ_RETURN_IF_ERROR(
      f.read_int(f.has("thread_count") ? "thread_count" : "intra_op_parallelism", &parallelism, 1, UINT32_MAX));
  out->intra_op_parallelism = static_cast<uint32_t>(parallelism);
  TZ_RETURN_IF_ERROR(f.read_bool("single_submit", &out->single_submit));
  TZ_RETURN_IF_ERROR(f.read_bool("overlap_events", &out->overlap_events));
  TZ_RETURN_IF_ERROR(f.read_bool("use_direct", &out->use_direct));
  TZ_RETURN_IF_ERROR(f.read_bool("register_buffers", &out->register_buffers));
  bool use_gds = false;  // the key registry warns when it is true (no GPUDirect Storage)
  TZ_RETURN_IF_ERROR(f.read_bool("use_gds", &use_gds));
  TZ_RETURN_IF_ERROR(nvme::validate(*out));
  TZ_RETURN_IF_ERROR(f.check_unused(warnings));
  return {};
}

}  // namespace tierzero::engine::detail
