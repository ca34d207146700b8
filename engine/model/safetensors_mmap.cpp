#include "engine/model/safetensors_mmap.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

namespace tierzero::engine {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // safetensors' own limit

// numel(shape) * item_size, or nullopt on a negative dimension or overflow.
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, size_t item_size) {
  uint64_t bytes = item_size;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) return std::nullopt;
    bytes *= static_cast<uint64_t>(d);
  }
  return bytes;
}

}  // namespace

size_t safetensors_item_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL") return 1;
  return 0;
}

Result<std::unique_ptr<MappedSafetensors>> MappedSafetensors::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    Status s = errno_status(err, fmt::format("opening {}", path));
    return err == ENOENT ? not_found(s.message()) : s;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status(err, fmt::format("stat of {}", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return corrupt(fmt::format("{}: {} bytes is too short for a safetensors file (8-byte header length first)",
                               path, size));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return errno_status(err, fmt::format("mmap of {}", path));
  std::unique_ptr<MappedSafetensors> file(new MappedSafetensors(path, map, size));
  TZ_RETURN_IF_ERROR(file->parse_header());
  return file;
}

MappedSafetensors::~MappedSafetensors() { ::munmap(map_, map_bytes_); }

Status MappedSafetensors::parse_header() {
  const auto* bytes = static_cast<const std::byte*>(map_);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes, 8);  // little endian, as every supported host
  if (header_bytes > kMaxHeaderBytes || header_bytes > map_bytes_ - 8) {
    return corrupt(fmt::format("{}: header length {} exceeds the file ({} bytes) or the 100 MB limit; the file is "
                               "truncated or not safetensors",
                               path_, header_bytes, map_bytes_));
  }
  const char* text = reinterpret_cast<const char*>(bytes + 8);
  nlohmann::json header = nlohmann::json::parse(text, text + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return corrupt(fmt::format("{}: the header is not a JSON object", path_));
  }
  const std::byte* data = bytes + 8 + header_bytes;
  const uint64_t data_bytes = map_bytes_ - 8 - header_bytes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    auto bad = [&](const std::string& what) { return corrupt(fmt::format("{}: tensor {}: {}", path_, name, what)); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry["shape"].is_array() || !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      return bad("needs \"dtype\" (string), \"shape\" (array) and \"data_offsets\" ([begin, end])");
    }
    MappedTensor t;
    t.name = name;
    t.dtype = entry["dtype"].get<std::string>();
    const size_t item = safetensors_item_size(t.dtype);
    if (item == 0) return bad(fmt::format("dtype {} is not loadable (F64, F32, F16, BF16, I64..I8, U8, BOOL)", t.dtype));
    for (const auto& d : entry["shape"]) {
      if (!d.is_number_integer()) return bad("shape entries must be integers");
      t.shape.push_back(d.get<int64_t>());
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) return bad("data_offsets must be unsigned");
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    const std::optional<uint64_t> expected = byte_size(t.shape, item);
    if (begin > end || end > data_bytes) {
      return bad(fmt::format("data_offsets [{}, {}] fall outside the data section ({} bytes)", begin, end, data_bytes));
    }
    if (!expected || *expected != end - begin) {
      return bad(fmt::format("shape x item size != data_offsets range ({} bytes)", end - begin));
    }
    t.data = data + begin;
    t.bytes = end - begin;
    tensors_.push_back(std::move(t));
  }
  return {};
}

}  // namespace tierzero::engine
