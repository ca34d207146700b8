// The record staging (offload.h): pinned buffers moving fixed-size records to and from swap files
// striped over the NVMe paths.
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/common.h"
#include "offload/offload.h"

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
  return std::max(RecordStaging::kRecordAlignment, RecordStaging::align_up((record_bytes + paths - 1) / paths));
}

std::string bytes_text(uint64_t bytes) { return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)"; }

}  // namespace

Result<std::unique_ptr<RecordStaging>> RecordStaging::create(const std::vector<std::span<std::byte>>& buffers,
                                                             const RecordStagingOptions& options,
                                                             std::vector<int64_t> names) {
  std::unique_ptr<RecordStaging> staging(new RecordStaging());
  staging->names_ = std::move(names);
  staging->record_bytes_ = options.record_bytes;
  staging->reads_.resize(buffers.size());  // sized first: the destructor walks them
  staging->writes_.resize(buffers.size());
  if (buffers.empty() && options.records == 0) return staging;  // nothing to stage: no IoEngine
  TZ_ASSIGN_OR_RETURN(staging->io_, nvme::IoEngine::create(options.io));
  for (const std::span<std::byte>& buffer : buffers) {
    TZ_RETURN_IF_ERROR(staging->io_->register_buffer(buffer.data(), buffer.size()));
    staging->buffers_.push_back(buffer);  // registered: the destructor unregisters it
  }
  if (options.records > 0) TZ_RETURN_IF_ERROR(staging->create_files(options));
  return staging;
}

Status RecordStaging::create_files(const RecordStagingOptions& options) {
  const SwapRole& role = options.role;
  const std::string rank = std::to_string(options.rank);
  if (options.paths.empty())
    return invalid_argument(std::string(role.key) + " is empty: give a directory on a fast local drive");
  records_ = options.records;
  part_bytes_ = part_bytes_of(options.paths.size(), options.record_bytes);
  role_ = role;
  const uint64_t file_bytes = part_bytes_ * static_cast<uint64_t>(records_);
  for (const std::string& dir : options.paths) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);  // as DeepSpeed makes its swap folder
    if (error)
      return io_error("cannot create " + dir + " (" + role.key + "): " + error.message() +
                      "; give a writable directory on a fast local drive");
    TZ_ASSIGN_OR_RETURN(uint64_t available, free_bytes(dir, role));
    const std::string path = dir + "/tierzero-" + role.file_stem + "-r" + rank + ".swap";
    if (available < file_bytes)
      return out_of_space("NVMe disk full: rank " + rank + "'s " + role.contents + " needs " + bytes_text(file_bytes) +
                          " in " + path + " but " + dir + " has " + bytes_text(available) + " free; " +
                          space_fix(role));
    Result<nvme::FileRef> file =
        io_->open(path, nvme::OpenOptions{.mode = nvme::OpenMode::kReadWrite, .preallocate_bytes = file_bytes});
    if (!file.ok())
      return file.status().with_context("rank " + rank + "'s " + role.file_stem + " swap file (" +
                                        bytes_text(file_bytes) + ", " + role.key + ")");
    parts_.push_back({std::move(file).value(), path});  // created: the destructor removes it
  }
  return Status();
}

RecordStaging::~RecordStaging() {
  for (size_t b = 0; b < buffers_.size(); ++b) {
    (void)wait_read(b);
    (void)wait_write(b);
    (void)io_->unregister_buffer(buffers_[b].data());
  }
  for (const Part& part : parts_) std::remove(part.path.c_str());
}

uint64_t RecordStaging::preallocated_bytes(size_t paths, int64_t records, uint64_t record_bytes) {
  if (paths == 0 || records <= 0) return 0;
  return part_bytes_of(paths, record_bytes) * static_cast<uint64_t>(records) * paths;
}

std::vector<RecordStaging::Transfer> RecordStaging::submit(nvme::Op op, int64_t record, std::byte* data, uint64_t begin,
                                                           uint64_t end) {
  std::vector<Transfer> transfers;
  for (uint64_t at = begin; at < end;) {  // a byte of the run: record `record` + at / record_bytes_
    const uint64_t offset = at % record_bytes_, bytes = std::min(end - at, record_bytes_ - offset);
    Transfer transfer{.op = op,
                      .record = record + static_cast<int64_t>(at / record_bytes_),
                      .begin = offset,
                      .end = offset + bytes,
                      .tickets = {},
                      .parts = {}};
    std::vector<nvme::IoRequest> requests;
    for (size_t p = 0; p < parts_.size(); ++p) {  // path p holds record bytes [p*P, (p+1)*P)
      const uint64_t lo = std::max<uint64_t>(transfer.begin, p * part_bytes_);
      const uint64_t hi = std::min<uint64_t>(transfer.end, (p + 1) * part_bytes_);
      if (lo >= hi) continue;
      requests.push_back({.file = parts_[p].file,
                          .op = op,
                          .offset = static_cast<uint64_t>(transfer.record) * part_bytes_ + (lo - p * part_bytes_),
                          .buffer = data + (at - begin) + (lo - transfer.begin),
                          .length = hi - lo});
      transfer.parts.push_back(p);
    }
    transfer.tickets = io_->submit_batch(std::move(requests));
    transfers.push_back(std::move(transfer));
    at += bytes;
  }
  return transfers;
}

void RecordStaging::read(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  reads_[b] = submit(nvme::Op::kRead, record, buffers_[b].data() + begin, begin, end);
}

void RecordStaging::read_at(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  reads_[b] = submit(nvme::Op::kRead, record, buffers_[b].data(), begin, end);
}

void RecordStaging::write(size_t b, int64_t record, uint64_t begin, uint64_t end) {
  writes_[b] = submit(nvme::Op::kWrite, record, buffers_[b].data(), begin, end);
}

bool RecordStaging::arrived(size_t b) const {
  return std::all_of(reads_[b].begin(), reads_[b].end(), [](const Transfer& transfer) {
    return std::all_of(transfer.tickets.begin(), transfer.tickets.end(),
                       [](const nvme::IoTicket& ticket) { return ticket.ready(); });
  });
}

Status RecordStaging::wait(std::vector<Transfer>& transfers) {
  Status first;
  for (const Transfer& transfer : transfers) {
    for (size_t p = 0; p < transfer.tickets.size(); ++p) {
      Status status = transfer.tickets[p].wait();
      if (!status.ok() && first.ok()) first = failure(transfer, transfer.parts[p], status);
    }
  }
  transfers.clear();
  return first;
}

Status RecordStaging::wait_read(size_t b) { return wait(reads_[b]); }

Status RecordStaging::wait_write(size_t b) { return wait(writes_[b]); }

Status RecordStaging::failure(const Transfer& transfer, size_t part, const Status& status) const {
  const Part& where = parts_[part];
  const uint64_t lo = std::max<uint64_t>(transfer.begin, part * part_bytes_);
  const uint64_t offset = static_cast<uint64_t>(transfer.record) * part_bytes_ + (lo - part * part_bytes_);
  const uint64_t length = std::min<uint64_t>(transfer.end, (part + 1) * part_bytes_) - lo;
  const auto k = static_cast<size_t>(transfer.record);
  const int64_t named = k < names_.size() ? names_[k] : transfer.record;
  const std::string what = std::string(transfer.op == nvme::Op::kRead ? "reading " : "writing ") + role_.record_name +
                           " " + std::to_string(named) + " (" + std::to_string(length) + " bytes at offset " +
                           std::to_string(offset) + " of " + where.path + ")";
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

uint64_t RecordStaging::file_bytes() const { return part_bytes_ * static_cast<uint64_t>(records_) * parts_.size(); }

std::string RecordStaging::describe() const {
  if (parts_.empty()) return "no file";
  std::string text = std::to_string(parts_.size()) + " file(s): ";
  for (size_t p = 0; p < parts_.size(); ++p) text += (p ? ", " : "") + parts_[p].path;
  return text;
}

std::vector<std::string> RecordStaging::files() const {
  std::vector<std::string> files;
  for (const Part& part : parts_) files.push_back(part.path);
  return files;
}

}  // namespace tierzero::offload
