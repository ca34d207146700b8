// A reader for the zip archives torch.save writes: stored (uncompressed) entries, zip64 when
// large, read lazily by offset — nothing but the central directory is loaded at open.
//
// Byte layout used (all little-endian; PKWARE APPNOTE 6.3):
//   [local header 30 B + name + extra][data] ... per entry
//   [central directory: 46 B + name + extra + comment per entry]
//   [zip64 end record 56 B + zip64 locator 20 B]   (only when a count/offset overflows 16/32 bits)
//   [end of central directory 22 B + comment ≤ 65535 B]
// Every count, size and offset is checked against the file size before use; compressed or
// encrypted entries are refused (torch.save never writes them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/common.h"

namespace tierzero::checkpoint {

// One stored entry: where its bytes lie in the archive file.
struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // file offset of the first data byte
  uint64_t size = 0;         // bytes of data (stored: compressed size == uncompressed size)
};

// An open zip archive of stored entries. Movable; closes its file on destruction. Reads are
// positional (pread), so one archive may serve several readers in turn without shared state.
class ZipArchive {
 public:
  ZipArchive(ZipArchive&&) noexcept;
  ZipArchive& operator=(ZipArchive&&) noexcept;
  ~ZipArchive();

  // Opens `path` and reads its central directory. Returns kNotFound / kIo when the file cannot
  // be opened or read, kCorrupt naming the file and byte offset for a truncated archive or a bad
  // central directory / local header, kUnsupported for a compressed or encrypted entry.
  static Result<ZipArchive> open(const std::string& path);
  // Opens the zip stored at bytes [offset, offset + size) of `path`: a torch.save blob inside a
  // larger file, as a PyTorch DCP .distcp file holds one per tensor chunk. Offsets in the zip
  // (data_offset too) count from `offset`; path() names the file and the range, so errors read
  // "FILE (bytes [A, +N)): byte B ...". Errors as open(), plus kCorrupt when the range passes the
  // end of the file.
  static Result<ZipArchive> open_range(const std::string& path, uint64_t offset, uint64_t size);

  const std::string& path() const { return path_; }
  // Where the zip starts in its file: 0, or open_range's offset.
  uint64_t base_offset() const { return base_; }
  uint64_t file_size() const { return file_size_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }
  // The entry named exactly `name`, or nullptr.
  const ZipEntry* find(std::string_view name) const;

  // Reads `out.size()` bytes starting `offset` bytes into `entry`'s data. Returns kCorrupt when
  // the range leaves the entry, kIo when the OS fails or the file ends early.
  Status read(const ZipEntry& entry, uint64_t offset, std::span<std::byte> out) const;

 private:
  ZipArchive(std::string path, int fd, uint64_t file_size, uint64_t base);
  Status read_at(uint64_t offset, std::span<std::byte> out) const;
  Status load_central_directory();

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;  // of the zip: the file's size, or open_range's size
  uint64_t base_ = 0;       // the zip's first byte in the file
  std::vector<ZipEntry> entries_;
};

}  // namespace tierzero::checkpoint
