// export_16bit_model / save_16bit_model: MasterWeightsSource -> checkpoint::consolidate_to_safetensors
// (the codebase's one safetensors writer) on rank 0.
// POSIX calls, not std::filesystem, for the directory moves: libtorch.so exports broken copies of
// some std::filesystem functions that the dynamic linker may bind instead of libstdc++'s.
#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "engine/zero/internal/master_weights_source.h"

namespace tierzero::engine {
namespace {

// The safetensors dtype of a compute dtype.
checkpoint::DType export_dtype(at::ScalarType compute_dtype) {
  switch (compute_dtype) {
    case at::kBFloat16: return checkpoint::DType::kBF16;
    case at::kHalf: return checkpoint::DType::kF16;
    default: return checkpoint::DType::kF32;
  }
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
  const Status written = checkpoint::consolidate_to_safetensors(source, out_dir, convert).status();
  const Status finished = source.finish();
  return written.ok() ? finished : written;
}

// The names of the files in directory `dir` (the consolidation output holds no subdirectories).
Result<std::vector<std::string>> list_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return errno_status(errno, "cannot list " + dir);
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  return names;
}

Status sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno_status(errno, "cannot open directory " + dir);
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return err == 0 ? Status() : errno_status(err, "cannot fsync directory " + dir);
}

// Removes the flat directory `dir` (a staging directory a crash left behind); missing is fine.
Status remove_flat_dir(const std::string& dir) {
  if (::access(dir.c_str(), F_OK) != 0) return Status();
  TZ_ASSIGN_OR_RETURN(std::vector<std::string> names, list_files(dir));
  for (const std::string& name : names)
    if (::unlink((dir + "/" + name).c_str()) != 0) return errno_status(errno, "cannot remove " + dir + "/" + name);
  return ::rmdir(dir.c_str()) == 0 ? Status() : errno_status(errno, "cannot remove directory " + dir);
}

// Moves every file of `from` into `to` (rename over same-named files), then removes `from`.
Status move_files(const std::string& from, const std::string& to) {
  TZ_ASSIGN_OR_RETURN(std::vector<std::string> names, list_files(from));
  for (const std::string& name : names)
    if (::rename((from + "/" + name).c_str(), (to + "/" + name).c_str()) != 0)
      return errno_status(errno, "cannot move " + from + "/" + name + " to " + to);
  TZ_RETURN_IF_ERROR(sync_dir(to));
  return ::rmdir(from.c_str()) == 0 ? Status() : errno_status(errno, "cannot remove directory " + from);
}

}  // namespace

Status export_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& out_dir,
                          const Export16bitOptions& options) {
  Status status = write_model_dir(engine, config_json, out_dir, options);
  return agree_across_ranks(engine.comm(), status, "exporting the 16-bit model to " + out_dir);
}

Status check_export_dir(const std::string& out_dir) {
  if (::access(out_dir.c_str(), F_OK) != 0) return Status();
  Result<std::vector<std::string>> names = list_files(out_dir);
  if (names.ok() && names.value().empty()) return Status();
  return invalid_argument("--export " + out_dir +
                          " exists and is not an empty directory; choose a new directory or remove it");
}

Status save_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& save_dir,
                        const Export16bitOptions& options) {
  const std::string staging = save_dir + "/16bit_model.staging";
  Status status = engine.comm().rank() == 0 ? remove_flat_dir(staging) : Status();
  TZ_RETURN_IF_ERROR(agree_across_ranks(engine.comm(), status, "clearing " + staging));
  status = write_model_dir(engine, config_json, staging, options);
  if (status.ok() && engine.comm().rank() == 0) status = move_files(staging, save_dir);
  return agree_across_ranks(engine.comm(), status, "saving the 16-bit model in " + save_dir);
}

}  // namespace tierzero::engine
