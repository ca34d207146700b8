// SafetensorsWriter: the header, then tensor bytes, staged in aligned buffers and written through
// nvme::IoEngine while the caller fills the next buffer.
#include <algorithm>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"

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
  auto b = dtype_bytes(dtype, numel);
  if (!b) return invalid_argument(fmt::format("tensor '{}': {} elements of {} are not a whole number of bytes",
                                              name, numel, dtype_name(dtype)));
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

SafetensorsWriter::SafetensorsWriter(nvme::IoEngine& engine, nvme::FileRef file, uint64_t file_bytes,
                                     const Options& options)
    : engine_(engine), file_(std::move(file)), file_bytes_(file_bytes), options_(options) {
  for (uint32_t i = 0; i < options_.buffer_count; ++i) buffers_.push_back(nvme::allocate_aligned(options_.buffer_bytes));
  in_flight_.resize(options_.buffer_count);
}

SafetensorsWriter::~SafetensorsWriter() {
  for (const nvme::IoTicket& t : in_flight_) {
    if (t.valid()) (void)t.wait();  // buffers must outlive their writes
  }
}

Result<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::create(
    nvme::IoEngine& engine, const std::string& path, const std::vector<TensorToWrite>& tensors,
    const std::map<std::string, std::string>& metadata, const Options& options) {
  if (options.buffer_count < 2 || options.buffer_bytes == 0 || options.buffer_bytes % 4096 != 0) {
    return invalid_argument("SafetensorsWriter needs >= 2 buffers of a nonzero multiple of 4096 bytes");
  }
  TZ_ASSIGN_OR_RETURN(std::string header, build_safetensors_header(tensors, metadata));
  uint64_t data_bytes = 0;
  for (const TensorToWrite& t : tensors) data_bytes += t.bytes().value();
  const uint64_t file_bytes = 8 + header.size() + data_bytes;
  nvme::OpenOptions open_options;
  open_options.mode = nvme::OpenMode::kWrite;
  open_options.preallocate_bytes = file_bytes;
  TZ_ASSIGN_OR_RETURN(nvme::FileRef file, engine.open(path, open_options));
  std::unique_ptr<SafetensorsWriter> writer(new SafetensorsWriter(engine, std::move(file), file_bytes, options));
  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
  TZ_RETURN_IF_ERROR(writer->append(length));
  TZ_RETURN_IF_ERROR(writer->append(std::as_bytes(std::span(header))));
  return writer;
}

Status SafetensorsWriter::append(std::span<const std::byte> bytes) {
  if (flushed_ + filled_ + bytes.size() > file_bytes_) {
    return invalid_argument(fmt::format("{}: {} more bytes appended than the header declares ({} in all)",
                                        file_->path(), flushed_ + filled_ + bytes.size() - file_bytes_,
                                        file_bytes_));
  }
  while (!bytes.empty()) {
    const uint64_t n = std::min<uint64_t>(bytes.size(), options_.buffer_bytes - filled_);
    std::memcpy(buffers_[current_].get() + filled_, bytes.data(), n);
    filled_ += n;
    bytes = bytes.subspan(n);
    if (filled_ == options_.buffer_bytes) TZ_RETURN_IF_ERROR(flush_current());
  }
  return {};
}

// Submits the current buffer and moves to the next one, waiting for that one's previous write.
Status SafetensorsWriter::flush_current() {
  if (filled_ > 0) {
    nvme::IoRequest request;
    request.file = file_;
    request.op = nvme::Op::kWrite;
    request.offset = flushed_;
    request.buffer = buffers_[current_].get();
    request.length = filled_;
    in_flight_[current_] = engine_.submit(std::move(request));
    flushed_ += filled_;
    filled_ = 0;
  }
  current_ = (current_ + 1) % buffers_.size();
  nvme::IoTicket previous = std::exchange(in_flight_[current_], nvme::IoTicket());
  return previous.valid() ? previous.wait() : Status();
}

Status SafetensorsWriter::finish() {
  if (flushed_ + filled_ != file_bytes_) {
    return internal_error(fmt::format("{}: finished after {} of the {} bytes its header declares", file_->path(),
                                      flushed_ + filled_, file_bytes_));
  }
  TZ_RETURN_IF_ERROR(flush_current());
  for (nvme::IoTicket& ticket : in_flight_) {
    if (ticket.valid()) TZ_RETURN_IF_ERROR(std::exchange(ticket, nvme::IoTicket()).wait());
  }
  return file_->sync();
}

}  // namespace tierzero::checkpoint
