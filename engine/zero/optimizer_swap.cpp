#include "engine/zero/internal/optimizer_swap.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "common/common.h"

namespace tierzero::engine {
namespace {

constexpr uint64_t kAlign = 4096;
constexpr const char* kSpaceFix =
    "free space there, or give zero_optimization.offload_optimizer.nvme_path a directory on a larger drive";

Result<uint64_t> free_bytes(const std::string& dir) {
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0)
    return errno_status(errno, "statvfs(" + dir +
                                   ") for zero_optimization.offload_optimizer.nvme_path; give an "
                                   "existing, writable directory");
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

std::string bytes_text(uint64_t bytes) { return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

}  // namespace

Result<std::unique_ptr<OptimizerSwap>> OptimizerSwap::create(nvme::IoEngine& io, const std::vector<std::string>& paths,
                                                             int rank, int64_t sub_groups, uint64_t record_bytes) {
  if (paths.empty())
    return invalid_argument(
        "zero_optimization.offload_optimizer.nvme_path is empty: give a directory on a fast "
        "local drive");
  const uint64_t share = (record_bytes + paths.size() - 1) / paths.size();
  const uint64_t part_bytes = std::max<uint64_t>(kAlign, (share + kAlign - 1) / kAlign * kAlign);
  const uint64_t file_bytes = part_bytes * static_cast<uint64_t>(sub_groups);
  std::unique_ptr<OptimizerSwap> swap(new OptimizerSwap(io, part_bytes, sub_groups));
  for (const std::string& dir : paths) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);  // as DeepSpeed makes its swap folder
    if (error)
      return io_error("cannot create " + dir + " (zero_optimization.offload_optimizer.nvme_path): " + error.message() +
                      "; give a writable directory on a fast local drive");
    TZ_ASSIGN_OR_RETURN(uint64_t available, free_bytes(dir));
    const std::string path = dir + "/tierzero-optimizer-r" + std::to_string(rank) + ".swap";
    if (available < file_bytes)
      return out_of_space("NVMe disk full: rank " + std::to_string(rank) + "'s optimizer state needs " +
                          bytes_text(file_bytes) + " in " + path + " but " + dir + " has " + bytes_text(available) +
                          " free; " + kSpaceFix);
    Result<nvme::FileRef> file =
        io.open(path, nvme::OpenOptions{.mode = nvme::OpenMode::kReadWrite, .preallocate_bytes = file_bytes});
    if (!file.ok())
      return file.status().with_context("rank " + std::to_string(rank) + "'s optimizer swap file (" +
                                        bytes_text(file_bytes) + ", zero_optimization.offload_optimizer.nvme_path)");
    swap->parts_.push_back({std::move(file).value(), path});
  }
  return swap;
}

OptimizerSwap::~OptimizerSwap() {
  for (const Part& part : parts_) std::remove(part.path.c_str());
}

SwapTransfer OptimizerSwap::submit(nvme::Op op, int64_t sub_group, void* buffer, uint64_t begin, uint64_t end) {
  SwapTransfer transfer{.op = op, .sub_group = sub_group, .begin = begin, .end = end, .tickets = {}, .parts = {}};
  std::vector<nvme::IoRequest> requests;
  for (size_t p = 0; p < parts_.size(); ++p) {  // path p holds record bytes [p*P, (p+1)*P)
    const uint64_t lo = std::max<uint64_t>(begin, p * part_bytes_);
    const uint64_t hi = std::min<uint64_t>(end, (p + 1) * part_bytes_);
    if (lo >= hi) continue;
    requests.push_back({.file = parts_[p].file,
                        .op = op,
                        .offset = static_cast<uint64_t>(sub_group) * part_bytes_ + (lo - p * part_bytes_),
                        .buffer = static_cast<std::byte*>(buffer) + lo,
                        .length = hi - lo});
    transfer.parts.push_back(p);
  }
  transfer.tickets = io_.submit_batch(std::move(requests));
  return transfer;
}

Status OptimizerSwap::wait(SwapTransfer& transfer) {
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

Status OptimizerSwap::failure(const SwapTransfer& transfer, size_t part, const Status& status) const {
  const Part& where = parts_[part];
  const uint64_t lo = std::max<uint64_t>(transfer.begin, part * part_bytes_);
  const uint64_t offset = static_cast<uint64_t>(transfer.sub_group) * part_bytes_ + (lo - part * part_bytes_);
  const uint64_t length = std::min<uint64_t>(transfer.end, (part + 1) * part_bytes_) - lo;
  const std::string what = std::string(transfer.op == nvme::Op::kRead ? "reading" : "writing") +
                           " optimizer sub-group " + std::to_string(transfer.sub_group) + " (" +
                           std::to_string(length) + " bytes at offset " + std::to_string(offset) + " of " + where.path +
                           ")";
  if (status.code() == ErrorCode::kOutOfSpace) {
    const std::string dir = where.path.substr(0, where.path.rfind('/'));
    Result<uint64_t> available = free_bytes(dir);
    return out_of_space("NVMe disk full " + what + ": needs " + bytes_text(length) + ", " + dir + " has " +
                        (available.ok() ? bytes_text(available.value()) : std::string("an unknown amount")) +
                        " free; " + kSpaceFix + " (" + status.message() + ")");
  }
  return status.with_context(what +
                             "; check the drive behind zero_optimization.offload_optimizer.nvme_path (a "
                             "failed device, or a file changed under the engine)");
}

uint64_t OptimizerSwap::file_bytes() const { return part_bytes_ * static_cast<uint64_t>(sub_groups_) * parts_.size(); }

std::string OptimizerSwap::describe() const {
  std::string text = std::to_string(parts_.size()) + " file(s): ";
  for (size_t p = 0; p < parts_.size(); ++p) text += (p ? ", " : "") + parts_[p].path;
  return text;
}

}  // namespace tierzero::engine
