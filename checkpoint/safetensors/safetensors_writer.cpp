// SafetensorsWriter: the header, then tensor bytes, streamed through a StreamWriter (nvme::IoEngine)
// with the declared size enforced, on fs::default_file_system().
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors/safetensors.h"
#include "checkpoint/storage/storage.h"

namespace tierzero::checkpoint {

Result<uint64_t> TensorToWrite::bytes() const {
  uint64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument(fmt::format("tensor '{}': negative dimension {}", name, d));
    const auto du = static_cast<uint64_t>(d);
    if (du != 0 && numel > std::numeric_limits<uint64_t>::max() / du) {
      return invalid_argument(fmt::format("tensor '{}': shape overflows 64 bits", name));
    }
    numel *= du;
  }
  auto b = element_bytes(dtype, numel);
  if (!b)
    return invalid_argument(
        fmt::format("tensor '{}': {} elements of {} are not a whole number of bytes", name, numel, dtype_name(dtype)));
  return *b;
}

Result<std::string> build_safetensors_header(const std::vector<TensorToWrite>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  // nlohmann::ordered_json keeps file order, so offsets read in increasing order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    TZ_ASSIGN_OR_RETURN(uint64_t bytes, t.bytes());
    if (header.contains(t.name)) return invalid_argument(fmt::format("tensor '{}' is written twice", t.name));
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

SafetensorsWriter::SafetensorsWriter(std::unique_ptr<StreamWriter> stream, uint64_t file_bytes)
    : stream_(std::move(stream)), file_bytes_(file_bytes) {}

SafetensorsWriter::~SafetensorsWriter() = default;

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(nvme::IoEngine& engine, const std::string& path,
                                                                     const std::vector<TensorToWrite>& tensors,
                                                                     const std::map<std::string, std::string>& metadata,
                                                                     const Options& options) {
  TZ_ASSIGN_OR_RETURN(std::string header, build_safetensors_header(tensors, metadata));
  uint64_t data_bytes = 0;
  for (const TensorToWrite& t : tensors) data_bytes += t.bytes().value();
  const uint64_t file_bytes = 8 + header.size() + data_bytes;
  TZ_ASSIGN_OR_RETURN(auto stream, StreamWriter::create(fs::default_file_system(), engine, path, file_bytes,
                                                        {options.buffer_bytes, options.buffer_count}));
  std::unique_ptr<SafetensorsWriter> writer(new SafetensorsWriter(std::move(stream), file_bytes));
  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
  TZ_RETURN_IF_ERROR(writer->append(length));
  TZ_RETURN_IF_ERROR(writer->append(std::as_bytes(std::span(header))));
  return writer;
}

Status SafetensorsWriter::check_room(uint64_t bytes) const {
  if (stream_->size() + bytes > file_bytes_) {
    return invalid_argument(fmt::format("{}: {} more bytes appended than the header declares ({} in all)",
                                        stream_->path(), stream_->size() + bytes - file_bytes_, file_bytes_));
  }
  return {};
}

Status SafetensorsWriter::append(std::span<const std::byte> bytes) {
  TZ_RETURN_IF_ERROR(check_room(bytes.size()));
  return stream_->append(bytes);
}

Result<std::span<std::byte>> SafetensorsWriter::reserve(uint64_t max_bytes) {
  if (max_bytes == 0) return invalid_argument(fmt::format("{}: reserve(0)", stream_->path()));
  TZ_RETURN_IF_ERROR(check_room(max_bytes));
  TZ_ASSIGN_OR_RETURN(std::span<std::byte> free, stream_->reserve());
  return free.first(std::min<uint64_t>(free.size(), max_bytes));
}

Status SafetensorsWriter::commit(uint64_t bytes) {
  TZ_RETURN_IF_ERROR(check_room(bytes));
  return stream_->commit(bytes);
}

Status SafetensorsWriter::finish() {
  if (stream_->size() != file_bytes_) {
    return internal_error(fmt::format("{}: finished after {} of the {} bytes its header declares", stream_->path(),
                                      stream_->size(), file_bytes_));
  }
  return stream_->finish();
}

}  // namespace tierzero::checkpoint
