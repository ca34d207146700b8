// export_16bit_model / save_16bit_model: MasterWeightsSource -> checkpoint::consolidate_to_safetensors
// (the codebase's one safetensors writer) on rank 0, published by the one commit protocol
// (checkpoint/storage/commit_transaction.cpp); every file-system call goes through
// fs::default_file_system().
#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/storage/storage.h"
#include "engine/zero/internal/master_weights_source.h"
#include "fs/file_system.h"

namespace tierzero::engine {
namespace {

// The dtype the export writes for a compute dtype: the 16-bit ones as they are, anything else fp32.
ElementType export_dtype(at::ScalarType compute_dtype) {
  const std::optional<ElementType> type = to_element_type(compute_dtype);
  return type == ElementType::kBF16 || type == ElementType::kF16 ? *type : ElementType::kF32;
}

// Rank 0 writes the master weights to `out_dir` (consolidate's contract) while the other ranks
// serve it their partitions' ranges.
Status write_model_dir(ZeroEngine& engine, const std::string& config_json, const std::string& out_dir,
                       const Export16bitOptions& options) {
  MasterWeightsSource source(engine, config_json);  // dtype key set by consolidate
  if (engine.comm().rank() != 0) return source.serve();
  checkpoint::ConvertOptions convert;
  convert.dtype = export_dtype(engine.options().partition.compute_dtype);
  convert.max_shard_bytes = options.max_shard_bytes;
  convert.read_ahead_bytes = options.read_ahead_bytes;
  convert.read_piece_bytes = options.read_piece_bytes;
  convert.progress = options.progress;
  convert.companion_dirs = options.companion_dirs;
  const Status written = checkpoint::consolidate_to_safetensors(source, out_dir, convert).status();
  const Status finished = source.finish();
  return written.ok() ? finished : written;
}

// The file a loader follows into an exported set (the index, or the one weights file): moved into
// a shared directory last, once the shards and config.json it needs are durable there.
const std::vector<std::string>& completing_files() {
  static const std::vector<std::string> names = {"model.safetensors.index.json", "model.safetensors"};
  return names;
}

}  // namespace

Status export_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& out_dir,
                          const Export16bitOptions& options) {
  Status status = write_model_dir(engine, config_json, out_dir, options);
  return agree_across_ranks(engine.comm(), status, "exporting the 16-bit model to " + out_dir);
}

Status check_export_dir(const std::string& out_dir) {
  fs::FileSystem& file_system = fs::default_file_system();
  if (!file_system.stat(out_dir).ok()) return Status();
  Result<std::vector<std::string>> names = file_system.list_dir(out_dir);
  if (names.ok() && names.value().empty()) return Status();
  return invalid_argument("--export " + out_dir +
                          " exists and is not an empty directory; choose a new directory or remove it");
}

Status save_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& save_dir,
                        const Export16bitOptions& options) {
  fs::FileSystem& file_system = fs::default_file_system();
  const std::string staging = save_dir + "/16bit_model.staging";
  Status status = engine.comm().rank() == 0 ? file_system.remove_tree(staging) : Status();
  TZ_RETURN_IF_ERROR(agree_across_ranks(engine.comm(), status, "clearing " + staging));
  status = write_model_dir(engine, config_json, staging, options);
  if (status.ok() && engine.comm().rank() == 0) {
    status = checkpoint::move_files_into(file_system, staging, save_dir, completing_files());
  }
  return agree_across_ranks(engine.comm(), status, "saving the 16-bit model in " + save_dir);
}

}  // namespace tierzero::engine
