// SafetensorsFile: a read-only mapping validated before any view is handed out.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "checkpoint/safetensors/safetensors.h"

namespace tierzero::checkpoint {

SafetensorsFile::SafetensorsFile(std::string path, const std::byte* map, uint64_t map_bytes)
    : path_(std::move(path)), map_(map), map_bytes_(map_bytes) {}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(const_cast<std::byte*>(map_), map_bytes_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, fmt::format("cannot open safetensors file {}", path));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(err, fmt::format("cannot stat {}", path));
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    return corrupt(
        fmt::format("{}: file is {} bytes, shorter than the 8-byte header length; it is truncated "
                    "or not a safetensors file",
                    path, file_bytes));
  }
  void* map = mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) return errno_status(map_errno, fmt::format("cannot mmap {}", path));
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(path, static_cast<const std::byte*>(map), file_bytes));

  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<uint8_t>(file->map_[i]);
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return corrupt(
        fmt::format("{}: header length {} exceeds the {}-byte limit; the file is damaged or not "
                    "a safetensors file",
                    path, header_bytes, kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes > file_bytes - 8) {
    return corrupt(
        fmt::format("{}: header of {} bytes runs past the end of the file ({} bytes); the file is "
                    "truncated",
                    path, header_bytes, file_bytes));
  }
  file->data_start_ = 8 + header_bytes;
  const std::string_view text(reinterpret_cast<const char*>(file->map_ + 8), header_bytes);
  TZ_ASSIGN_OR_RETURN(file->header_, parse_safetensors_header(text, file_bytes - file->data_start_, path));
  for (size_t i = 0; i < file->header_.tensors.size(); ++i) file->by_name_.emplace(file->header_.tensors[i].name, i);
  return file;
}

const SafetensorsTensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

std::span<const std::byte> SafetensorsFile::data(const SafetensorsTensorInfo& tensor) const {
  return {map_ + data_start_ + tensor.begin, tensor.end - tensor.begin};
}

}  // namespace tierzero::checkpoint
