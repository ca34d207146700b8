#include "offload/offload.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "common/common.h"

namespace tierzero::offload {
namespace {

std::string space_fix(const SwapRole& role) {
  return std::string("free space there, or give ") + role.key + " a directory on a larger drive";
}

Result<uint64_t> free_bytes(const std::string& dir, const SwapRole& role) {
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0)
    return errno_status(errno, "statvfs(" + dir + ") for " + role.key + "; give an existing, writable directory");
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

// A path's share of a record of `record_bytes` over `paths` paths, rounded up to kRecordAlignment.
uint64_t part_bytes_of(size_t paths, uint64_t record_bytes) {
  return std::max(SwapFiles::kRecordAlignment, SwapFiles::align_up((record_bytes + paths - 1) / paths));
}

std::string bytes_text(uint64_t bytes) { return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

}  // namespace

Result<std::unique_ptr<SwapFiles>> SwapFiles::create(nvme::IoEngine& io, const std::vector<std::string>& paths,
                                                     int rank, int64_t sub_groups, uint64_t record_bytes,
                                                     const SwapRole& role, int64_t first_named) {
  if (paths.empty())
    return invalid_argument(std::string(role.key) + " is empty: give a directory on a fast local drive");
  const uint64_t part_bytes = part_bytes_of(paths.size(), record_bytes);
  const uint64_t file_bytes = part_bytes * static_cast<uint64_t>(sub_groups);
  std::unique_ptr<SwapFiles> swap(new SwapFiles(io, part_bytes, sub_groups, role, first_named));
  for (const std::string& dir : paths) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);  // as DeepSpeed makes its swap folder
    if (error)
      return io_error("cannot create " + dir + " (" + role.key + "): " + error.message() +
                      "; give a writable directory on a fast local drive");
    TZ_ASSIGN_OR_RETURN(uint64_t available, free_bytes(dir, role));
    const std::string path = dir + "/tierzero-" + role.file_stem + "-r" + std::to_string(rank) + ".swap";
    if (available < file_bytes)
      return out_of_space("NVMe disk full: rank " + std::to_string(rank) + "'s " + role.contents + " needs " +
                          bytes_text(file_bytes) + " in " + path + " but " + dir + " has " + bytes_text(available) +
                          " free; " + space_fix(role));
    Result<nvme::FileRef> file =
        io.open(path, nvme::OpenOptions{.mode = nvme::OpenMode::kReadWrite, .preallocate_bytes = file_bytes});
    if (!file.ok())
      return file.status().with_context("rank " + std::to_string(rank) + "'s " + role.file_stem + " swap file (" +
                                        bytes_text(file_bytes) + ", " + role.key + ")");
    swap->parts_.push_back({std::move(file).value(), path});
  }
  return swap;
}

SwapFiles::~SwapFiles() {
  for (const Part& part : parts_) std::remove(part.path.c_str());
}

SwapTransfer SwapFiles::submit_at(nvme::Op op, int64_t sub_group, void* data, uint64_t begin, uint64_t end) {
  SwapTransfer transfer{.op = op, .sub_group = sub_group, .begin = begin, .end = end, .tickets = {}, .parts = {}};
  std::vector<nvme::IoRequest> requests;
  for (size_t p = 0; p < parts_.size(); ++p) {  // path p holds record bytes [p*P, (p+1)*P)
    const uint64_t lo = std::max<uint64_t>(begin, p * part_bytes_);
    const uint64_t hi = std::min<uint64_t>(end, (p + 1) * part_bytes_);
    if (lo >= hi) continue;
    requests.push_back({.file = parts_[p].file,
                        .op = op,
                        .offset = static_cast<uint64_t>(sub_group) * part_bytes_ + (lo - p * part_bytes_),
                        .buffer = static_cast<std::byte*>(data) + (lo - begin),
                        .length = hi - lo});
    transfer.parts.push_back(p);
  }
  transfer.tickets = io_.submit_batch(std::move(requests));
  return transfer;
}

Status SwapFiles::wait(SwapTransfer& transfer) {
  Status first;
  size_t failed_part = 0;
  for (size_t p = 0; p < transfer.tickets.size(); ++p) {
    Status status = transfer.tickets[p].wait();
    if (!status.ok() && first.ok()) {
      first = status;
      failed_part = p;
    }
  }
  Status result = first.ok() ? first : failure(transfer, transfer.parts[failed_part], first);
  transfer.tickets.clear();
  transfer.parts.clear();
  transfer.sub_group = -1;
  return result;
}

Status SwapFiles::failure(const SwapTransfer& transfer, size_t part, const Status& status) const {
  const Part& where = parts_[part];
  const uint64_t lo = std::max<uint64_t>(transfer.begin, part * part_bytes_);
  const uint64_t offset = static_cast<uint64_t>(transfer.sub_group) * part_bytes_ + (lo - part * part_bytes_);
  const uint64_t length = std::min<uint64_t>(transfer.end, (part + 1) * part_bytes_) - lo;
  const std::string what = std::string(transfer.op == nvme::Op::kRead ? "reading " : "writing ") + role_.record_name +
                           " " + std::to_string(transfer.sub_group + first_named_) + " (" + std::to_string(length) +
                           " bytes at offset " + std::to_string(offset) + " of " + where.path + ")";
  if (status.code() == ErrorCode::kOutOfSpace) {
    const std::string dir = where.path.substr(0, where.path.rfind('/'));
    Result<uint64_t> available = free_bytes(dir, role_);
    return out_of_space("NVMe disk full " + what + ": needs " + bytes_text(length) + ", " + dir + " has " +
                        (available.ok() ? bytes_text(available.value()) : std::string("an unknown amount")) +
                        " free; " + space_fix(role_) + " (" + status.message() + ")");
  }
  return status.with_context(what + "; check the drive behind " + role_.key +
                             " (a failed device, or a file changed under the engine)");
}

uint64_t SwapFiles::preallocated_bytes(size_t paths, int64_t records, uint64_t record_bytes) {
  if (paths == 0 || records <= 0) return 0;
  return part_bytes_of(paths, record_bytes) * static_cast<uint64_t>(records) * paths;
}

uint64_t SwapFiles::file_bytes() const { return part_bytes_ * static_cast<uint64_t>(sub_groups_) * parts_.size(); }

std::string SwapFiles::describe() const {
  std::string text = std::to_string(parts_.size()) + " file(s): ";
  for (size_t p = 0; p < parts_.size(); ++p) text += (p ? ", " : "") + parts_[p].path;
  return text;
}

std::vector<std::string> SwapFiles::files() const {
  std::vector<std::string> files;
  for (const Part& part : parts_) files.push_back(part.path);
  return files;
}

}  // namespace tierzero::offload
