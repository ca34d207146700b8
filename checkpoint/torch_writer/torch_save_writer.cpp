// TorchSaveWriter: the tensors' pickle form and the stored zip torch.load opens (torch_writer.h).
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <optional>
#include <utility>

#include "checkpoint/torch_writer/torch_writer.h"

namespace tierzero::checkpoint {
namespace {

constexpr uint64_t kAlignment = 64;  // torch.save aligns every entry's data to 64 bytes

std::optional<std::string_view> storage_name(ElementType dtype) {
  static constexpr std::pair<ElementType, std::string_view> kTypes[] = {
      {ElementType::kF32, "FloatStorage"},     {ElementType::kF64, "DoubleStorage"}, {ElementType::kF16, "HalfStorage"},
      {ElementType::kBF16, "BFloat16Storage"}, {ElementType::kI64, "LongStorage"},   {ElementType::kI32, "IntStorage"},
      {ElementType::kI16, "ShortStorage"},     {ElementType::kI8, "CharStorage"},    {ElementType::kU8, "ByteStorage"},
      {ElementType::kBool, "BoolStorage"},
  };
  for (const auto& [type, name] : kTypes) {
    if (type == dtype) return name;
  }
  return std::nullopt;
}

uint32_t crc32(std::span<const std::byte> data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (std::byte b : data) c = table[(c ^ static_cast<uint8_t>(b)) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// A stored zip built in memory, entry by entry.
class ZipBuilder {
 public:
  void add(const std::string& name, std::span<const std::byte> data) {
    const uint64_t offset = out_.size();
    const uint64_t header_end = offset + 30 + name.size() + 4;  // + the padding field's own header
    const uint64_t pad = (kAlignment - header_end % kAlignment) % kAlignment;
    const uint32_t crc = crc32(data);
    put32(0x04034b50);
    put16(20), put16(0), put16(0), put16(0), put16(0x21);  // version, flags, stored, time, date
    put32(crc), put32(static_cast<uint32_t>(data.size())), put32(static_cast<uint32_t>(data.size()));
    put16(static_cast<uint16_t>(name.size())), put16(static_cast<uint16_t>(4 + pad));
    out_.insert(out_.end(), reinterpret_cast<const std::byte*>(name.data()),
                reinterpret_cast<const std::byte*>(name.data()) + name.size());
    put16(0x4246), put16(static_cast<uint16_t>(pad));  // "FB": torch's padding field
    out_.insert(out_.end(), pad, std::byte{'Z'});
    out_.insert(out_.end(), data.begin(), data.end());
    entries_.push_back({name, crc, data.size(), offset});
  }

  // The central directory and its end record; the archive's bytes.
  std::vector<std::byte> finish() {
    const uint64_t directory = out_.size();
    for (const Entry& e : entries_) {
      put32(0x02014b50);
      put16(20), put16(20), put16(0), put16(0), put16(0), put16(0x21);
      put32(e.crc), put32(static_cast<uint32_t>(e.size)), put32(static_cast<uint32_t>(e.size));
      put16(static_cast<uint16_t>(e.name.size())), put16(0), put16(0), put16(0), put16(0), put32(0);
      put32(static_cast<uint32_t>(e.offset));
      out_.insert(out_.end(), reinterpret_cast<const std::byte*>(e.name.data()),
                  reinterpret_cast<const std::byte*>(e.name.data()) + e.name.size());
    }
    const uint64_t directory_size = out_.size() - directory;
    put32(0x06054b50);
    put16(0), put16(0), put16(static_cast<uint16_t>(entries_.size())), put16(static_cast<uint16_t>(entries_.size()));
    put32(static_cast<uint32_t>(directory_size)), put32(static_cast<uint32_t>(directory)), put16(0);
    return std::move(out_);
  }

 private:
  struct Entry {
    std::string name;
    uint32_t crc;
    uint64_t size, offset;
  };
  void put16(uint16_t v) {
    for (int i = 0; i < 2; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  void put32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<std::byte>(v >> (8 * i)));
  }
  std::vector<std::byte> out_;
  std::vector<Entry> entries_;
};

std::span<const std::byte> text(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

}  // namespace

Status TorchSaveWriter::tensor(ElementType dtype, const std::vector<int64_t>& shape, std::span<const std::byte> bytes) {
  const auto storage = storage_name(dtype);
  if (!storage) return invalid_argument(std::string("torch.save has no storage type for ") + torch_dtype_name(dtype));
  uint64_t numel = 1;
  for (int64_t d : shape) numel *= static_cast<uint64_t>(d);
  if (bytes.size() != numel * element_size(dtype)) {
    return invalid_argument("tensor of " + std::to_string(numel) + " " + torch_dtype_name(dtype) + " elements given " +
                            std::to_string(bytes.size()) + " bytes");
  }
  PickleWriter& p = pickle_;
  p.global("torch._utils", "_rebuild_tensor_v2");
  p.begin_tuple();
  p.begin_tuple();  // the persistent id
  p.string("storage");
  p.global("torch", *storage);
  p.string(std::to_string(storages_.size()));
  p.string("cpu");
  p.integer(static_cast<int64_t>(numel));
  p.end_tuple();
  p.persistent_id();
  p.integer(0);  // storage offset
  p.begin_tuple();
  for (int64_t d : shape) p.integer(d);
  p.end_tuple();
  p.begin_tuple();  // contiguous strides
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  for (int64_t s : strides) p.integer(s);
  p.end_tuple();
  p.boolean(false);  // requires_grad
  p.global("collections", "OrderedDict");
  p.begin_tuple();
  p.end_tuple();
  p.reduce();  // backward hooks: OrderedDict()
  p.end_tuple();
  p.reduce();
  storages_.emplace_back(bytes.begin(), bytes.end());
  return {};
}

Status TorchSaveWriter::write(const std::string& path) {
  const std::string pickle = pickle_.finish();
  uint64_t total = pickle.size() + 4096;
  for (const auto& s : storages_) total += s.size() + 2 * kAlignment;
  if (total >= (uint64_t{1} << 32)) {
    return unsupported(path + ": " + std::to_string(total) +
                       " bytes would need ZIP64, which this writer does not "
                       "produce yet; write more ranks (--world-size) so that each file stays under 4 GiB");
  }
  ZipBuilder zip;
  zip.add(prefix_ + "/data.pkl", text(pickle));
  zip.add(prefix_ + "/.format_version", text("1"));
  zip.add(prefix_ + "/.storage_alignment", text("64"));
  zip.add(prefix_ + "/byteorder", text("little"));
  for (size_t i = 0; i < storages_.size(); ++i) zip.add(prefix_ + "/data/" + std::to_string(i), storages_[i]);
  zip.add(prefix_ + "/version", text("3\n"));
  const std::vector<std::byte> bytes = zip.finish();

  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(errno, "creating " + path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const Status s = errno_status(n < 0 ? errno : EIO, "writing " + path + " at byte " + std::to_string(done));
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const Status s = errno_status(errno, "fsync of " + path);
    ::close(fd);
    return s;
  }
  if (::close(fd) != 0) return errno_status(errno, "closing " + path);
  return {};
}

}  // namespace tierzero::checkpoint
