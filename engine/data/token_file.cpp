// Token files (format in token_data.h): the TZTOKENS header, headerless .u16/.u32 streams
// mapped read-only, and packing into seq_len + 1 token windows.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

#include "engine/data/token_data.h"

namespace tierzero::engine {
namespace {

constexpr char kMagic[8] = {'T', 'Z', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr uint64_t kHeaderBytes = 32;
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaskedVersion = 2;  // flags at byte 24; bit 0: a loss mask follows the tokens
constexpr uint64_t kLossMaskFlag = 1;

uint32_t token_bytes(TokenDtype dtype) { return dtype == TokenDtype::kUint16 ? 2 : 4; }

template <typename T>
T load_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(p[i]) << (8 * i);
  return v;
}

template <typename T>
void store_le(unsigned char* p, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

// A read-only mapping of a whole file.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno_status(errno, "cannot open token file " + path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      Status s = errno_status(errno, "cannot stat token file " + path);
      ::close(fd);
      return s;
    }
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size == 0) {
      ::close(fd);
      return corrupt("token file " + path + " is empty");
    }
    void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    if (data == MAP_FAILED) return errno_status(err, "cannot map token file " + path);
    return std::unique_ptr<MappedFile>(new MappedFile(static_cast<const unsigned char*>(data), size));
  }
  ~MappedFile() { ::munmap(const_cast<unsigned char*>(data_), size_); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* data() const { return data_; }
  uint64_t size() const { return size_; }

 private:
  MappedFile(const unsigned char* data, uint64_t size) : data_(data), size_(size) {}
  const unsigned char* data_;
  uint64_t size_;
};

class TokenFileSource final : public SampleSource {
 public:
  // `mask_offset`: where the loss mask starts, 0 when there is none.
  TokenFileSource(std::unique_ptr<MappedFile> file, uint64_t offset, uint64_t tokens, TokenDtype dtype, int64_t seq_len,
                  uint64_t mask_offset)
      : file_(std::move(file)),
        tokens_(file_->data() + offset),
        mask_(mask_offset ? file_->data() + mask_offset : nullptr),
        count_(tokens),
        dtype_(dtype),
        seq_len_(seq_len) {}

  int64_t size() const override { return static_cast<int64_t>((count_ - 1) / static_cast<uint64_t>(seq_len_)); }
  int64_t seq_len() const override { return seq_len_; }

  Status read(int64_t index, int64_t* input_ids, int64_t* targets) const override {
    if (index < 0 || index >= size()) {
      return invalid_argument("sample " + std::to_string(index) + " is outside [0, " + std::to_string(size()) + ")");
    }
    const uint64_t first = static_cast<uint64_t>(index) * static_cast<uint64_t>(seq_len_);
    for (int64_t t = 0; t < seq_len_; ++t) {
      const uint64_t next = first + static_cast<uint64_t>(t) + 1;
      input_ids[t] = token(next - 1);
      targets[t] = mask_ == nullptr || ((mask_[next / 8] >> (next % 8)) & 1) ? token(next) : kIgnoreIndex;
    }
    return {};
  }

 private:
  int64_t token(uint64_t i) const {
    return dtype_ == TokenDtype::kUint16 ? load_le<uint16_t>(tokens_ + 2 * i) : load_le<uint32_t>(tokens_ + 4 * i);
  }
  std::unique_ptr<MappedFile> file_;
  const unsigned char* tokens_;
  const unsigned char* mask_;  // bit i: token i is a target; nullptr: every token is
  uint64_t count_;
  TokenDtype dtype_;
  int64_t seq_len_;
};

std::optional<TokenDtype> dtype_from_extension(const std::string& path) {
  auto ends_with = [&](const char* ext) { return path.ends_with(ext); };
  if (ends_with(".u16") || ends_with(".uint16")) return TokenDtype::kUint16;
  if (ends_with(".u32") || ends_with(".uint32")) return TokenDtype::kUint32;
  return std::nullopt;
}

}  // namespace

Result<TokenDtype> parse_token_dtype(std::string_view name) {
  if (name == "uint16" || name == "u16") return TokenDtype::kUint16;
  if (name == "uint32" || name == "u32") return TokenDtype::kUint32;
  return invalid_argument("token dtype \"" + std::string(name) + "\" is not one of uint16, uint32");
}

Status write_token_file(const std::string& path, std::span<const uint32_t> tokens, TokenDtype dtype) {
  const uint32_t width = token_bytes(dtype);
  std::vector<unsigned char> bytes(kHeaderBytes + tokens.size() * width, 0);
  std::memcpy(bytes.data(), kMagic, sizeof kMagic);
  store_le<uint32_t>(bytes.data() + 8, kVersion);
  store_le<uint32_t>(bytes.data() + 12, width);
  store_le<uint64_t>(bytes.data() + 16, tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (dtype == TokenDtype::kUint16 && tokens[i] > std::numeric_limits<uint16_t>::max()) {
      return invalid_argument("token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
                              " does not fit uint16; write the file as uint32");
    }
    unsigned char* p = bytes.data() + kHeaderBytes + i * width;
    if (width == 2)
      store_le<uint16_t>(p, static_cast<uint16_t>(tokens[i]));
    else
      store_le<uint32_t>(p, tokens[i]);
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return io_error("cannot write token file " + path + ": check the directory exists and is writable");
  return {};
}

Result<std::shared_ptr<const SampleSource>> open_token_file(const std::string& path, int64_t seq_len,
                                                            std::optional<TokenDtype> dtype) {
  if (seq_len < 1) return invalid_argument("seq_len must be >= 1, got " + std::to_string(seq_len));
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::open(path));
  uint64_t offset = 0;
  uint64_t payload = file->size();
  uint64_t mask_offset = 0;
  if (file->size() >= sizeof kMagic && std::memcmp(file->data(), kMagic, sizeof kMagic) == 0) {
    if (file->size() < kHeaderBytes) return corrupt(path + ": TZTOKENS header is cut short");
    const uint32_t version = load_le<uint32_t>(file->data() + 8);
    const uint32_t width = load_le<uint32_t>(file->data() + 12);
    const uint64_t count = load_le<uint64_t>(file->data() + 16);
    if (version != kVersion && version != kMaskedVersion) {
      return corrupt(path + ": TZTOKENS version " + std::to_string(version) +
                     " is not 1 or 2: written by a newer tierzero, or damaged");
    }
    const uint64_t flags = version == kMaskedVersion ? load_le<uint64_t>(file->data() + 24) : 0;
    if ((flags & ~kLossMaskFlag) != 0)
      return corrupt(path + ": TZTOKENS flags " + std::to_string(flags) + " name unknown features");
    if (width != 2 && width != 4)
      return corrupt(path + ": bytes per token is " + std::to_string(width) + ", not 2 or 4");
    const TokenDtype header_dtype = width == 2 ? TokenDtype::kUint16 : TokenDtype::kUint32;
    if (dtype && *dtype != header_dtype) {
      return invalid_argument(path + ": the header says " + std::to_string(8 * width) +
                              "-bit tokens but another dtype was given; drop the dtype setting");
    }
    const uint64_t body = file->size() - kHeaderBytes;
    const uint64_t mask_bytes = (flags & kLossMaskFlag) ? count / 8 + (count % 8 != 0) : 0;
    if (count > body / width || body - count * width != mask_bytes) {
      return corrupt(path + ": the header says " + std::to_string(count) + " tokens" +
                     (mask_bytes ? " and a loss mask" : "") + " but the file holds " + std::to_string(body) +
                     " bytes after the header");
    }
    if (mask_bytes) mask_offset = kHeaderBytes + count * width;
    dtype = header_dtype;
    offset = kHeaderBytes;
    payload = count * width;
  } else {
    if (!dtype) dtype = dtype_from_extension(path);
    if (!dtype) {
      return invalid_argument(path +
                              " has no TZTOKENS header and its extension does not give the token width: name "
                              "it .u16/.u32 or set tierzero.data.dtype");
    }
    if (payload % token_bytes(*dtype) != 0) {
      return corrupt(path + " is " + std::to_string(payload) + " bytes, not a multiple of the " +
                     std::to_string(token_bytes(*dtype)) + "-byte token width");
    }
  }
  const uint64_t count = payload / token_bytes(*dtype);
  if (count < static_cast<uint64_t>(seq_len) + 1) {
    return invalid_argument(path + " holds " + std::to_string(count) + " tokens, fewer than seq_len + 1 = " +
                            std::to_string(seq_len + 1) + ": use a shorter seq_len or more data");
  }
  return std::shared_ptr<const SampleSource>(
      std::make_shared<TokenFileSource>(std::move(file), offset, count, *dtype, seq_len, mask_offset));
}

}  // namespace tierzero::engine
