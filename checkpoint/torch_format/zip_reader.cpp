#include "checkpoint/torch_format/internal/zip_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_set>
#include <utility>

namespace tierzero::checkpoint {
namespace {

constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint64_t kEndSize = 22;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint64_t kZip64EndSize = 56;
constexpr uint64_t kCentralHeaderSize = 46;
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint64_t kMaxCommentSize = 65535;
// A central directory beyond this is not a torch.save file (that would be millions of tensors).
constexpr uint64_t kMaxCentralDirectorySize = 256ull << 20;

uint16_t le16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) | std::to_integer<uint16_t>(p[1]) << 8);
}
uint32_t le32(const std::byte* p) { return le16(p) | static_cast<uint32_t>(le16(p + 2)) << 16; }
uint64_t le64(const std::byte* p) { return le32(p) | static_cast<uint64_t>(le32(p + 4)) << 32; }

// The central-directory fields an entry may move into its zip64 extra field.
struct WideFields {
  uint64_t uncompressed;
  uint64_t compressed;
  uint64_t local_offset;
};

// Replaces the 0xFFFFFFFF placeholders in `f` from the zip64 extra field (id 1) in `extra`.
// Returns false when a needed value is missing.
bool apply_zip64_extra(std::span<const std::byte> extra, WideFields& f) {
  const bool need_u = f.uncompressed == 0xffffffffu, need_c = f.compressed == 0xffffffffu,
             need_o = f.local_offset == 0xffffffffu;
  if (!need_u && !need_c && !need_o) return true;
  size_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const uint16_t id = le16(extra.data() + pos), len = le16(extra.data() + pos + 2);
    pos += 4;
    if (len > extra.size() - pos) return false;
    if (id == 1) {
      size_t p = pos;
      const size_t end = pos + len;
      auto take = [&](uint64_t& v) {
        if (end - p < 8) return false;
        v = le64(extra.data() + p);
        p += 8;
        return true;
      };
      return (!need_u || take(f.uncompressed)) && (!need_c || take(f.compressed)) && (!need_o || take(f.local_offset));
    }
    pos += len;
  }
  return false;
}

}  // namespace

ZipArchive::ZipArchive(std::string path, int fd, uint64_t file_size, uint64_t base)
    : path_(std::move(path)), fd_(fd), file_size_(file_size), base_(base) {}

ZipArchive::ZipArchive(ZipArchive&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      file_size_(o.file_size_),
      base_(o.base_),
      entries_(std::move(o.entries_)) {}

ZipArchive& ZipArchive::operator=(ZipArchive&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    file_size_ = o.file_size_;
    base_ = o.base_;
    entries_ = std::move(o.entries_);
  }
  return *this;
}

ZipArchive::~ZipArchive() {
  if (fd_ >= 0) ::close(fd_);
}

Result<ZipArchive> ZipArchive::open(const std::string& path) { return open_range(path, 0, UINT64_MAX); }

Result<ZipArchive> ZipArchive::open_range(const std::string& path, uint64_t offset, uint64_t size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, "cannot open " + path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(err, "cannot stat " + path);
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (size == UINT64_MAX && offset == 0) {
    ZipArchive archive(path, fd, file_size, 0);
    TZ_RETURN_IF_ERROR(archive.load_central_directory());
    return archive;
  }
  const std::string range = " (bytes [" + std::to_string(offset) + ", +" + std::to_string(size) + "))";
  if (offset > file_size || size > file_size - offset) {
    ::close(fd);
    return corrupt(path + range + ": the range passes the end of the file, " + std::to_string(file_size) +
                   " bytes (truncated file?)");
  }
  ZipArchive archive(path + range, fd, size, offset);
  TZ_RETURN_IF_ERROR(archive.load_central_directory());
  return archive;
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  for (const ZipEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Status ZipArchive::read(const ZipEntry& entry, uint64_t offset, std::span<std::byte> out) const {
  if (offset > entry.size || out.size() > entry.size - offset) {
    return corrupt(path_ + ": read of " + std::to_string(out.size()) + " bytes at offset " + std::to_string(offset) +
                   " leaves zip entry '" + entry.name + "' (" + std::to_string(entry.size) + " bytes)");
  }
  return read_at(entry.data_offset + offset, out);
}

Status ZipArchive::read_at(uint64_t offset, std::span<std::byte> out) const {
  size_t done = 0;
  while (done < out.size()) {
    if (offset + done >= file_size_) {
      return io_error(path_ + ": zip ends at byte " + std::to_string(file_size_) + ", expected " +
                      std::to_string(out.size() - done) + " more bytes (truncated file?)");
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(out.size() - done, file_size_ - offset - done));
    const ssize_t n = ::pread(fd_, out.data() + done, want, static_cast<off_t>(base_ + offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, path_ + ": read at byte " + std::to_string(offset + done));
    }
    if (n == 0) {
      return io_error(path_ + ": file ends at byte " + std::to_string(offset + done) + ", expected " +
                      std::to_string(out.size() - done) + " more bytes (truncated file?)");
    }
    done += static_cast<size_t>(n);
  }
  return {};
}

Status ZipArchive::load_central_directory() {
  const std::string where = path_ + ": ";
  if (file_size_ < kEndSize) {
    return corrupt(where + "truncated zip: " + std::to_string(file_size_) +
                   " bytes is too short for an end-of-central-directory record; re-copy the file");
  }
  // The end record sits in the last 22 + comment bytes; search backwards for its signature.
  const uint64_t tail_size = std::min(file_size_, kEndSize + kMaxCommentSize);
  const uint64_t tail_start = file_size_ - tail_size;
  std::vector<std::byte> tail(tail_size);
  TZ_RETURN_IF_ERROR(read_at(tail_start, tail));
  int64_t end_pos = -1;
  for (int64_t i = static_cast<int64_t>(tail_size - kEndSize); i >= 0; --i) {
    const std::byte* p = tail.data() + i;
    if (le32(p) == kEndSig && static_cast<uint64_t>(i) + kEndSize + le16(p + 20) == tail_size) {
      end_pos = i;
      break;
    }
  }
  if (end_pos < 0) {
    return corrupt(where + "truncated zip: no end-of-central-directory record in the last " +
                   std::to_string(tail_size) + " bytes (file cut short?); re-copy the checkpoint");
  }
  const std::byte* end = tail.data() + end_pos;
  const uint64_t end_offset = tail_start + static_cast<uint64_t>(end_pos);
  const uint16_t disk = le16(end + 4), cd_disk = le16(end + 6);
  if ((disk != 0 && disk != 0xffff) || (cd_disk != 0 && cd_disk != 0xffff)) {
    return unsupported(where + "multi-disk zip archives are not supported");
  }
  uint64_t count = le16(end + 10);
  uint64_t cd_size = le32(end + 12);
  uint64_t cd_offset = le32(end + 16);
  uint64_t cd_limit = end_offset;  // the central directory ends before this offset

  if (count == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    if (end_offset < kZip64LocatorSize) {
      return corrupt(where + "truncated zip: zip64 locator missing before byte " + std::to_string(end_offset));
    }
    const uint64_t locator_offset = end_offset - kZip64LocatorSize;
    std::byte locator[kZip64LocatorSize];
    TZ_RETURN_IF_ERROR(read_at(locator_offset, locator));
    if (le32(locator) != kZip64LocatorSig) {
      return corrupt(where + "bad central directory: no zip64 locator at byte " + std::to_string(locator_offset));
    }
    const uint64_t z64_offset = le64(locator + 8);
    if (z64_offset > locator_offset || locator_offset - z64_offset < kZip64EndSize) {
      return corrupt(where + "bad central directory: zip64 end record offset " + std::to_string(z64_offset) +
                     " is out of range (locator at byte " + std::to_string(locator_offset) + ")");
    }
    std::byte z64[kZip64EndSize];
    TZ_RETURN_IF_ERROR(read_at(z64_offset, z64));
    if (le32(z64) != kZip64EndSig) {
      return corrupt(where + "bad central directory: no zip64 end record at byte " + std::to_string(z64_offset));
    }
    count = le64(z64 + 32);
    cd_size = le64(z64 + 40);
    cd_offset = le64(z64 + 48);
    cd_limit = z64_offset;
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
    return corrupt(where + "bad central directory: it claims bytes [" + std::to_string(cd_offset) + ", +" +
                   std::to_string(cd_size) + ") but the end record is at byte " + std::to_string(cd_limit) +
                   " (truncated or damaged file)");
  }
  if (cd_size > kMaxCentralDirectorySize) {
    return corrupt(where + "bad central directory: " + std::to_string(cd_size) + " bytes exceeds the " +
                   std::to_string(kMaxCentralDirectorySize) + "-byte limit");
  }
  if (count > cd_size / kCentralHeaderSize) {
    return corrupt(where + "bad central directory: " + std::to_string(count) + " entries cannot fit in " +
                   std::to_string(cd_size) + " bytes");
  }

  std::vector<std::byte> cd(cd_size);
  TZ_RETURN_IF_ERROR(read_at(cd_offset, cd));
  entries_.reserve(count);
  std::unordered_set<std::string_view> names;
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t at = cd_offset + pos;
    if (cd_size - pos < kCentralHeaderSize || le32(cd.data() + pos) != kCentralHeaderSig) {
      return corrupt(where + "bad central directory: entry " + std::to_string(i) + " at byte " + std::to_string(at) +
                     " has no central header signature");
    }
    const std::byte* h = cd.data() + pos;
    const uint16_t flags = le16(h + 8), method = le16(h + 10);
    const uint64_t name_len = le16(h + 28), extra_len = le16(h + 30), comment_len = le16(h + 32);
    if (cd_size - pos - kCentralHeaderSize < name_len + extra_len + comment_len) {
      return corrupt(where + "bad central directory: entry " + std::to_string(i) + " at byte " + std::to_string(at) +
                     " runs past the directory end");
    }
    std::string name(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
    WideFields f{le32(h + 24), le32(h + 20), le32(h + 42)};
    if (!apply_zip64_extra({h + kCentralHeaderSize + name_len, extra_len}, f)) {
      return corrupt(where + "bad central directory: entry '" + name + "' at byte " + std::to_string(at) +
                     " lacks the zip64 sizes its header promises");
    }
    if (flags & 1u) return unsupported(where + "zip entry '" + name + "' is encrypted");
    if (method != 0) {
      return unsupported(where + "zip entry '" + name + "' is compressed (method " + std::to_string(method) +
                         "); torch.save writes stored entries only — re-save the file with torch.save");
    }
    if (f.compressed != f.uncompressed) {
      return corrupt(where + "bad central directory: stored entry '" + name + "' has compressed size " +
                     std::to_string(f.compressed) + " != size " + std::to_string(f.uncompressed));
    }
    // The local header repeats the name; its extra field (torch pads with it) sets the data start.
    if (f.local_offset > cd_offset || cd_offset - f.local_offset < kLocalHeaderSize) {
      return corrupt(where + "bad central directory: entry '" + name + "' local header offset " +
                     std::to_string(f.local_offset) + " is outside the data area");
    }
    std::byte local[kLocalHeaderSize];
    TZ_RETURN_IF_ERROR(read_at(f.local_offset, local));
    if (le32(local) != kLocalHeaderSig) {
      return corrupt(where + "bad local header for entry '" + name + "' at byte " + std::to_string(f.local_offset));
    }
    const uint64_t data_offset = f.local_offset + kLocalHeaderSize + le16(local + 26) + le16(local + 28);
    if (data_offset > cd_offset || f.uncompressed > cd_offset - data_offset) {
      return corrupt(where + "zip entry '" + name + "' data [" + std::to_string(data_offset) + ", +" +
                     std::to_string(f.uncompressed) + ") overlaps the central directory at byte " +
                     std::to_string(cd_offset) + " (truncated file?)");
    }
    pos += kCentralHeaderSize + name_len + extra_len + comment_len;
    entries_.push_back({std::move(name), data_offset, f.uncompressed});
  }
  for (const ZipEntry& e : entries_) {
    if (!names.insert(e.name).second) {
      return corrupt(where + "bad central directory: entry name '" + e.name + "' appears twice");
    }
  }
  return {};
}

}  // namespace tierzero::checkpoint
