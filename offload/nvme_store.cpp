#include "offload/internal/nvme_store.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "common/common.h"

namespace tierzero::offload {
namespace {

constexpr uint64_t kExtentAlign = 4096;

// Bytes a swap file at `file_path` could grow to: free space plus what it already holds (just
// the free space when `file_path` is empty or does not exist).
Result<uint64_t> space_for(const std::string& dir, const std::string& file_path) {
  struct statvfs vfs {};
  if (statvfs(dir.c_str(), &vfs) != 0) {
    return errno_status(errno, "statvfs(" + dir + ") for the NVMe tier; check nvme_paths names an existing directory");
  }
  uint64_t have = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  std::error_code ec;
  const uint64_t existing = std::filesystem::file_size(file_path, ec);
  if (!ec) have += existing;
  return have;
}

// The disk-full error: what needed `needed` bytes on `dir`, the bytes free there now, the fix.
Status disk_full(const std::string& what, const std::string& dir, uint64_t needed, const std::string& cause) {
  struct statvfs vfs {};
  const std::string free = statvfs(dir.c_str(), &vfs) == 0
                               ? format_bytes(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize) + " free"
                               : "unknown free space (statvfs failed)";
  return out_of_space("NVMe disk full: " + what + " needs " + format_bytes(needed) + " but " + dir + " has " + free +
                      " (statvfs); free space on that disk, or set a smaller nvme_bytes or another nvme_path" +
                      (cause.empty() ? "" : " (" + cause + ")"));
}

// True when the file system holds blocks for all `bytes` of the file (fallocate reserved them).
bool fully_allocated(const nvme::File& file, uint64_t bytes) {
  struct stat st {};
  return fstat(file.fd(), &st) == 0 && static_cast<uint64_t>(st.st_blocks) * 512 >= bytes;
}

}  // namespace

Result<std::unique_ptr<NvmeStore>> NvmeStore::create(const TierBudgets& budgets, nvme::IoEngine& io) {
  const uint64_t stripe = budgets.stripe_bytes;
  if (stripe == 0 || stripe % kExtentAlign != 0) {
    return invalid_argument("stripe_bytes " + std::to_string(stripe) + " must be a nonzero multiple of 4096");
  }
  const uint64_t n = budgets.nvme_paths.size();
  if (n == 0) return invalid_argument("nvme_bytes is " + format_bytes(budgets.nvme_bytes) + " but nvme_paths is empty");
  const uint64_t per_file = RangeAllocator::round_up((budgets.nvme_bytes + n - 1) / n, stripe);
  std::unique_ptr<NvmeStore> store(new NvmeStore(io, stripe, budgets.keep_nvme_files));
  for (uint64_t k = 0; k < n; ++k) {
    const std::string& dir = budgets.nvme_paths[k];
    const std::string path = dir + "/" + budgets.swap_file_prefix + "-s" + std::to_string(k) + ".bin";
    TZ_ASSIGN_OR_RETURN(uint64_t available, space_for(dir, path));
    if (per_file > available) {
      return out_of_space("NVMe tier: " + path + " needs " + format_bytes(per_file) + " (nvme_bytes " +
                          format_bytes(budgets.nvme_bytes) + " over " + std::to_string(n) + " path(s)) but " + dir +
                          " has " + format_bytes(available) +
                          " free (statvfs); free space, add nvme_paths or lower nvme_bytes");
    }
    nvme::OpenOptions options;
    options.mode = nvme::OpenMode::kReadWrite;
    options.preallocate_bytes = per_file;
    Result<nvme::FileRef> file = io.open(path, options);
    if (file.status().code() == ErrorCode::kOutOfSpace) {
      return disk_full("preallocating the swap file " + path, dir, per_file, file.status().message());
    }
    if (!file.ok()) return file.status().with_context("opening the NVMe swap file");
    // The whole file inside i_size from the start: ext4/xfs run a direct write past the end of the
    // file (an extending write) alone under the inode lock, synchronously; inside it, writes run
    // together. Never shrinks a kept file.
    TZ_ASSIGN_OR_RETURN(const uint64_t size, (*file)->size());
    if (size < per_file) TZ_RETURN_IF_ERROR((*file)->truncate(per_file).with_context("sizing the NVMe swap file"));
    store->files_.push_back({*file, path, dir, RangeAllocator(per_file), fully_allocated(**file, per_file)});
  }
  return store;
}

NvmeStore::~NvmeStore() {
  if (keep_) return;
  for (const SwapFile& f : files_) unlink(f.path.c_str());
}

std::string NvmeStore::describe() const {
  std::string s = "nvme: " + format_bytes(capacity()) + " in " + std::to_string(files_.size()) +
                  " preallocated swap file(s), stripe " + format_bytes(stripe_) + ":";
  for (const SwapFile& f : files_) s += " " + f.path;
  return s;
}

uint64_t NvmeStore::capacity() const {
  uint64_t sum = 0;
  for (const SwapFile& f : files_) sum += f.extents.capacity();
  return sum;
}

uint64_t NvmeStore::used() const {
  uint64_t sum = 0;
  for (const SwapFile& f : files_) sum += f.extents.used();
  return sum;
}

Result<NvmeExtent> NvmeStore::allocate(uint64_t bytes) {
  const uint64_t n = files_.size();
  const uint64_t stripes = (bytes + stripe_ - 1) / stripe_;
  NvmeExtent extent;
  extent.bytes = bytes;
  for (uint64_t f = 0; f < n && f < stripes; ++f) {
    const uint64_t part = (stripes - f + n - 1) / n * stripe_;
    std::optional<uint64_t> offset = files_[f].extents.allocate(part, kExtentAlign);
    if (!offset) {
      free(extent);
      return out_of_space("NVMe tier full: a shard of " + format_bytes(bytes) + " needs " + format_bytes(part) +
                          " in " + files_[f].path + ", whose largest free extent is " +
                          format_bytes(files_[f].extents.largest_free()) + " (" + format_bytes(used()) + " of " +
                          format_bytes(capacity()) + " used); raise nvme_bytes");
    }
    extent.part_offset.push_back(*offset);
    extent.part_bytes.push_back(part);
  }
  return extent;
}

Status NvmeStore::check_disk_room(uint64_t bytes) const {
  const uint64_t n = files_.size();
  const uint64_t stripes = (bytes + stripe_ - 1) / stripe_;
  for (uint64_t f = 0; f < n && f < stripes; ++f) {
    if (files_[f].reserved) continue;
    const uint64_t part = (stripes - f + n - 1) / n * stripe_;
    Result<uint64_t> available = space_for(files_[f].dir, "");
    if (available.ok() && *available < part) {
      return disk_full("a shard of " + format_bytes(bytes) + " in " + files_[f].path +
                           " (not preallocated: the file system refused fallocate)",
                       files_[f].dir, part, "");
    }
  }
  return {};
}

void NvmeStore::free(const NvmeExtent& extent) {
  for (size_t f = 0; f < extent.part_offset.size(); ++f) {
    files_[f].extents.free(extent.part_offset[f], extent.part_bytes[f], kExtentAlign);
  }
}

Result<NvmeExtent> NvmeStore::claim(const NvmeShardRecord& record) {
  const std::string& id = record.spec.id;
  if (record.stripe_bytes != stripe_) {
    return invalid_argument("shard " + id + " was recorded with stripe " + std::to_string(record.stripe_bytes) +
                            " bytes but this NVMe tier stripes " + std::to_string(stripe_) +
                            "; use the same stripe_bytes");
  }
  const uint64_t stripes = (record.spec.bytes + stripe_ - 1) / stripe_;
  const uint64_t want_parts = std::min<uint64_t>(stripes, files_.size());
  if (record.parts.size() != want_parts) {
    return invalid_argument("shard " + id + " has " + std::to_string(record.parts.size()) + " extent parts; " +
                            std::to_string(want_parts) + " expected over " + std::to_string(files_.size()) +
                            " swap file(s)");
  }
  NvmeExtent extent;
  extent.bytes = record.spec.bytes;
  for (size_t f = 0; f < record.parts.size(); ++f) {
    const NvmeExtentPart& part = record.parts[f];
    const uint64_t n = files_.size();
    const uint64_t expect_bytes = (stripes - f + n - 1) / n * stripe_;
    if (part.file != files_[f].path || part.bytes != expect_bytes || part.offset % kExtentAlign != 0 ||
        !files_[f].extents.claim(part.offset, part.bytes)) {
      free(extent);
      return invalid_argument("shard " + id + ": extent part " + std::to_string(f) + " (" + part.file + " @" +
                              std::to_string(part.offset) + ", " + std::to_string(part.bytes) +
                              " bytes) is not a free, aligned extent of " + files_[f].path +
                              "; re-attach to the swap files the manifest was taken from");
    }
    extent.part_offset.push_back(part.offset);
    extent.part_bytes.push_back(part.bytes);
  }
  return extent;
}

std::vector<NvmeExtentPart> NvmeStore::parts(const NvmeExtent& extent) const {
  std::vector<NvmeExtentPart> out;
  for (size_t f = 0; f < extent.part_offset.size(); ++f) {
    out.push_back({files_[f].path, extent.part_offset[f], extent.part_bytes[f]});
  }
  return out;
}

Status NvmeStore::full_disk(const Status& status, const NvmeExtent& extent, uint64_t bytes) const {
  if (status.code() != ErrorCode::kOutOfSpace) return status;
  std::string files;
  const SwapFile* failed = &files_[0];  // the file the I/O error names, else the first
  for (size_t f = 0; f < extent.part_offset.size(); ++f) {
    files += (f ? ", " : "") + files_[f].path;
    if (status.message().find(files_[f].path) != std::string::npos) failed = &files_[f];
  }
  return disk_full("writing " + format_bytes(bytes) + " to the swap file(s) " + files, failed->dir, bytes,
                   status.message());
}

std::vector<nvme::IoTicket> NvmeStore::submit(const NvmeExtent& extent, nvme::Op op, uint64_t shard_offset,
                                              void* buffer, uint64_t length) {
  const uint64_t n = extent.part_offset.size();
  std::vector<nvme::IoRequest> requests;
  auto* bytes = static_cast<std::byte*>(buffer);
  for (uint64_t pos = shard_offset; pos < shard_offset + length;) {
    const uint64_t stripe = pos / stripe_;
    const uint64_t f = stripe % n;
    const uint64_t file_offset = extent.part_offset[f] + stripe / n * stripe_ + pos % stripe_;
    const uint64_t piece = std::min((stripe + 1) * stripe_, shard_offset + length) - pos;
    nvme::IoRequest* last = requests.empty() ? nullptr : &requests.back();
    if (last && last->file == files_[f].file && last->offset + last->length == file_offset) {
      last->length += piece;
    } else {
      requests.push_back({files_[f].file, op, file_offset, bytes + (pos - shard_offset), piece, false});
    }
    pos += piece;
  }
  return io_.submit_batch(std::move(requests));
}

Status wait_all(const std::vector<nvme::IoTicket>& tickets) {
  Status first;
  for (const nvme::IoTicket& t : tickets) {
    Status s = t.wait();
    if (first.ok() && !s.ok()) first = s;
  }
  return first;
}

}  // namespace tierzero::offload
