#include "checkpoint/torch_format/torch_file.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "checkpoint/torch_format/internal/pickle_reader.h"
#include "common/common.h"

namespace tierzero::checkpoint {
namespace {

static_assert(std::endian::native == std::endian::little, "torch storages are read as little-endian");

// data.pkl beyond this is not a checkpoint's metadata (a DeepSpeed optimizer pickle is kilobytes).
constexpr uint64_t kMaxPickleSize = 512ull << 20;
// Elements widened per read when the storage is not fp32.
constexpr size_t kWidenChunk = 1 << 16;

template <typename T>
void widen(const std::byte* in, std::span<float> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, in + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

void widen_to_fp32(ElementType dtype, const std::byte* in, std::span<float> out) {
  switch (dtype) {
    case ElementType::kF32: std::memcpy(out.data(), in, out.size_bytes()); return;
    case ElementType::kF64: widen<double>(in, out); return;
    case ElementType::kI64: widen<int64_t>(in, out); return;
    case ElementType::kI32: widen<int32_t>(in, out); return;
    case ElementType::kI16: widen<int16_t>(in, out); return;
    case ElementType::kI8: widen<int8_t>(in, out); return;
    case ElementType::kU8: widen<uint8_t>(in, out); return;
    case ElementType::kBool:
      for (size_t i = 0; i < out.size(); ++i) out[i] = in[i] != std::byte{0} ? 1.0f : 0.0f;
      return;
    case ElementType::kF16: fp16_to_floats(in, out); return;
    case ElementType::kBF16: bf16_to_floats(in, out); return;
    default: return;  // not a storage type: storage_dtype() yields only those above
  }
}

}  // namespace

Result<TorchFile> TorchFile::open(const std::string& path) {
  TZ_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::open(path));
  return from_zip(std::move(zip));
}

Result<TorchFile> TorchFile::open_range(const std::string& path, uint64_t offset, uint64_t size) {
  TZ_ASSIGN_OR_RETURN(ZipArchive zip, ZipArchive::open_range(path, offset, size));
  return from_zip(std::move(zip));
}

Result<TorchFile> TorchFile::from_zip(ZipArchive zip) {
  const std::string& path = zip.path();
  // The pickle is PREFIX/data.pkl for a single top-level folder PREFIX.
  const ZipEntry* pickle = nullptr;
  for (const ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && slash > 0 && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      pickle = &e;
      break;
    }
  }
  if (pickle == nullptr) {
    return corrupt(path +
                   ": no PREFIX/data.pkl entry: not a torch.save zip file (a legacy non-zip torch "
                   "file? re-save it with a current torch.save)");
  }
  std::string prefix = pickle->name.substr(0, pickle->name.find('/') + 1);
  if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
    std::string text(std::min<uint64_t>(order->size, 16), '\0');
    TZ_RETURN_IF_ERROR(zip.read(*order, 0, std::as_writable_bytes(std::span(text))));
    if (text != "little") {
      return unsupported(path + ": storages are '" + text + "'-endian; only little-endian files are supported");
    }
  }
  if (pickle->size > kMaxPickleSize) {
    return corrupt(path + ": " + pickle->name + " is " + std::to_string(pickle->size) + " bytes, over the " +
                   std::to_string(kMaxPickleSize) + "-byte limit for checkpoint metadata");
  }
  std::vector<std::byte> bytes(pickle->size);
  TZ_RETURN_IF_ERROR(zip.read(*pickle, 0, bytes));
  TZ_ASSIGN_OR_RETURN(PickleDocument doc,
                      parse_pickle(bytes, path + ": " + pickle->name, zip.base_offset() + pickle->data_offset));
  return TorchFile(std::move(zip), std::move(doc), std::move(prefix));
}

Status TorchFile::read_fp32(const TorchTensor& t, uint64_t first, std::span<float> out) const {
  if (first > t.numel || out.size() > t.numel - first) {
    return invalid_argument(path() + ": elements [" + std::to_string(first) + ", +" + std::to_string(out.size()) +
                            ") are outside a tensor of " + std::to_string(t.numel));
  }
  const ZipEntry& entry = zip_.entries()[t.entry];
  const auto item = static_cast<uint32_t>(element_size(t.dtype));
  const uint64_t byte_offset = (t.storage_offset + first) * item;  // in range: checked by tensor()
  if (t.dtype == ElementType::kF32) {
    return zip_.read(entry, byte_offset, std::as_writable_bytes(out));
  }
  std::vector<std::byte> raw(std::min(out.size(), kWidenChunk) * item);
  for (size_t done = 0; done < out.size();) {
    const size_t n = std::min(out.size() - done, kWidenChunk);
    TZ_RETURN_IF_ERROR(zip_.read(entry, byte_offset + done * item, std::span(raw).first(n * item)));
    widen_to_fp32(t.dtype, raw.data(), out.subspan(done, n));
    done += n;
  }
  return {};
}

Status TorchFile::read_bytes(const TorchTensor& t, std::span<std::byte> out) const {
  const auto item = static_cast<uint32_t>(element_size(t.dtype));
  if (out.size() != t.numel * item) {
    return invalid_argument(path() + ": a tensor of " + std::to_string(t.numel) + " " + torch_dtype_name(t.dtype) +
                            " elements needs " + std::to_string(t.numel * item) + " bytes, not " +
                            std::to_string(out.size()));
  }
  return zip_.read(zip_.entries()[t.entry], t.storage_offset * item, out);
}

}  // namespace tierzero::checkpoint
