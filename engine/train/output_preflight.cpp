#include "engine/train/internal/output_preflight.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include <fmt/format.h>

namespace tierzero::engine::trainer {
namespace {

constexpr uint64_t kMetadataBytes = 1ull << 20;  // manifests, records, config and tokenizer files

std::string named(const OutputDestination& d) { return d.what + " " + d.path; }

// The directory the destination's files are written in.
std::string written_dir(const OutputDestination& d) {
  const bool beside = d.kind == OutputKind::kStagedBeside || d.kind == OutputKind::kFile;
  return beside ? fs::parent_dir(d.path) : fs::strip_trailing_slashes(d.path);
}

// `dir` and each missing parent created (mkdir -p) — or, for a swap directory, required to exist.
Status ensure_directory(const OutputDestination& d, const std::string& dir, fs::FileSystem& fs) {
  std::string prefix = dir.starts_with('/') ? "/" : "";
  size_t begin = prefix.size();
  while (begin <= dir.size()) {
    const size_t end = std::min(dir.find('/', begin), dir.size());
    if (end > begin) {
      if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
      prefix += dir.substr(begin, end - begin);
      struct stat st {};
      if (::stat(prefix.c_str(), &st) == 0) {
        if (!S_ISDIR(st.st_mode))
          return invalid_argument(
              fmt::format("{}: {} is a file, not a directory; pass a {} path whose parents are all "
                          "directories (or move {} away)",
                          named(d), prefix, d.what, prefix));
      } else if (errno != ENOENT) {
        return errno_status(
            errno, fmt::format("{}: cannot look at {}; choose a directory this user can reach", named(d), prefix));
      } else if (d.kind == OutputKind::kSwapDirectory) {
        return not_found(fmt::format("{}: {} does not exist; create it (mkdir -p {}) on the NVMe drive, or change {}",
                                     named(d), prefix, dir, d.what));
      } else if (Result<bool> made = fs.make_dir(prefix); !made.ok()) {
        return io_error(
            fmt::format("{}: {}; choose a location this user can write to (check the permissions, and "
                        "that the file system is not mounted read-only)",
                        named(d), made.status().message()));
      }
    }
    begin = end + 1;
  }
  return Status();
}

// Writes, fsyncs and removes DIR/.tierzero_write_probe.TAG: the file system takes a file there.
Status probe_writable(const OutputDestination& d, const std::string& dir, const std::string& tag, fs::FileSystem& fs) {
  const std::string probe = dir + "/.tierzero_write_probe." + tag;
  const std::string text = "tierzero checks that this directory takes files; removed at once\n";
  Status status = [&]() -> Status {
    TZ_ASSIGN_OR_RETURN(std::unique_ptr<fs::WritableFile> file, fs.create(probe, fs::WriteOptions{}));
    TZ_RETURN_IF_ERROR(file->append(std::as_bytes(std::span(text.data(), text.size()))));
    TZ_RETURN_IF_ERROR(file->sync());
    return file->close();
  }();
  const Status removed = fs.remove_file(probe);
  if (status.ok() && removed.code() != ErrorCode::kNotFound) status = removed;
  if (status.ok()) return status;
  return io_error(
      fmt::format("{}: cannot write in {}: {}; make it writable by this user (a read-only mount, "
                  "permissions, or a full disk), or choose another {}",
                  named(d), dir, status.message(), d.what));
}

// The file system holding `dir` (stat's st_dev); 0 when stat fails.
uint64_t device_of(const std::string& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_dev) : 0;
}

// Free space on the file system of `dir` against what `sharing` (destinations on it) plan to write.
Status check_space(const std::string& dir, const std::vector<const OutputDestination*>& sharing, fs::FileSystem& fs) {
  uint64_t needed = 0;
  std::string parts;  // each destination's bytes: "--save DIR: 1.00 GiB (one checkpoint: ...) + ..."
  for (const OutputDestination* d : sharing) {
    if (d->planned_bytes == 0) continue;
    needed += d->planned_bytes;
    parts += fmt::format("{}{}: {} ({})", parts.empty() ? "" : " + ", named(*d), format_bytes(d->planned_bytes),
                         d->planned_what);
  }
  if (needed == 0) return Status();
  // One destination on the file system: its count alone; several: each one's bytes.
  const std::string what = sharing.size() == 1 ? sharing.front()->planned_what : parts;
  TZ_ASSIGN_OR_RETURN(const fs::SpaceInfo space, fs.free_space(dir));
  if (space.available_bytes >= needed) return Status();
  std::string names;
  for (const OutputDestination* d : sharing) names += (names.empty() ? "" : " and ") + named(*d);
  return out_of_space(
      fmt::format("{}: {} needed, {} free on the file system holding {} ({}); free space there or "
                  "choose a destination on a larger file system",
                  names, format_bytes(needed), format_bytes(space.available_bytes), dir, what));
}

}  // namespace

Status check_output_destinations(const std::vector<OutputDestination>& destinations, const std::string& probe_tag,
                                 fs::FileSystem& fs) {
  std::map<uint64_t, std::vector<const OutputDestination*>> by_file_system;
  std::map<uint64_t, std::string> a_dir_of;
  for (const OutputDestination& d : destinations) {
    struct stat st {};
    if (d.kind == OutputKind::kFile && ::stat(d.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return invalid_argument(fmt::format("{} is a directory; pass a file path for {}", named(d), d.what));
    if (d.kind == OutputKind::kStagedBeside && ::stat(d.path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      return invalid_argument(
          fmt::format("{} is a file, not a directory; pass a directory path for {}", named(d), d.what));
    const std::string dir = written_dir(d);
    TZ_RETURN_IF_ERROR(ensure_directory(d, dir, fs));
    TZ_RETURN_IF_ERROR(probe_writable(d, dir, probe_tag, fs));
    const uint64_t device = device_of(dir);
    by_file_system[device].push_back(&d);
    a_dir_of.emplace(device, dir);
  }
  for (const auto& [device, sharing] : by_file_system) TZ_RETURN_IF_ERROR(check_space(a_dir_of[device], sharing, fs));
  return Status();
}

uint64_t planned_checkpoint_bytes(const Plan& plan, std::string& what) {
  // The state as it lives (engine/zero/checkpoint_io.cpp): the master 4 B (fp32, or a compact one's
  // bf16 weights + int16 residual), each moment 4 (fp32), 2 (bf16) or 1 + 4/256 (int8 codes + scales).
  const auto parameters = static_cast<uint64_t>(plan.parameters);
  const bool int8 = plan.optimizer_state == "int8", bf16 = plan.optimizer_state == "bf16";
  const uint64_t moment = int8 ? parameters + (parameters + 255) / 256 * 4 : parameters * (bf16 ? 2 : 4);
  const uint64_t bytes = 4 * parameters + 2 * moment;
  what = fmt::format("one checkpoint: {} + 2 {} Adam moments, {:.2f} B x {} parameters, uncompressed",
                     plan.master_weights == "compact" ? "compact master (bf16 weights + int16 residual)" : "fp32 master",
                     int8 ? "8-bit" : bf16 ? "bf16" : "fp32",
                     static_cast<double>(bytes) / static_cast<double>(std::max<uint64_t>(parameters, 1)), parameters);
  return bytes + kMetadataBytes;
}

uint64_t planned_export_bytes(const Plan& plan, int64_t model_parameters, std::string& what) {
  const uint64_t element_bytes = plan.precision == "fp32" ? 4 : 2;
  what = fmt::format("the {} model: {} B x {} parameters", plan.precision, element_bytes, model_parameters);
  return element_bytes * static_cast<uint64_t>(model_parameters) + kMetadataBytes;
}

}  // namespace tierzero::engine::trainer
