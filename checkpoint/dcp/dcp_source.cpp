#include "checkpoint/dcp/dcp_source.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "checkpoint/dcp/internal/dcp_metadata.h"
#include "checkpoint/torch_format/torch_file.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

// Calls fn(full_first, chunk_first, count) for each run of elements that is contiguous both in the
// row-major tensor of `shape` and in the row-major chunk: the chunk's trailing dimensions that span
// the tensor merge into one run with the innermost one that does not.
template <typename Fn>
Status for_each_run(const std::vector<int64_t>& shape, const DcpChunk& chunk, Fn&& fn) {
  const size_t rank = shape.size();
  if (rank == 0) return fn(0, 0, 1);
  if (std::find(chunk.sizes.begin(), chunk.sizes.end(), 0) != chunk.sizes.end()) return {};
  std::vector<uint64_t> stride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * static_cast<uint64_t>(shape[d + 1]);
  size_t inner = rank - 1;  // runs span dimensions [inner, rank)
  while (inner > 0 && chunk.sizes[inner] == shape[inner]) --inner;
  uint64_t run = 1;
  for (size_t d = inner; d < rank; ++d) run *= static_cast<uint64_t>(chunk.sizes[d]);
  std::vector<int64_t> index(inner, 0);  // over the outer dimensions [0, inner)
  for (uint64_t chunk_first = 0;; chunk_first += run) {
    uint64_t full_first = static_cast<uint64_t>(chunk.offsets[inner]) * stride[inner];
    for (size_t d = 0; d < inner; ++d) full_first += static_cast<uint64_t>(chunk.offsets[d] + index[d]) * stride[d];
    TZ_RETURN_IF_ERROR(fn(full_first, chunk_first, run));
    size_t d = inner;
    while (d > 0 && ++index[d - 1] == chunk.sizes[d - 1]) index[--d] = 0;
    if (d == 0) return {};
  }
}

class DcpSource final : public ConsolidationSource {
 public:
  DcpSource(std::string dir, std::vector<DcpTensor> tensors, std::string config)
      : dir_(std::move(dir)), tensors_(std::move(tensors)), config_(std::move(config)) {
    for (const DcpTensor& t : tensors_) specs_.push_back({t.name, t.shape});
  }

  const std::vector<TensorSpec>& tensors() const override { return specs_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return no_aliases_; }
  std::string model_config_json() const override { return config_; }
  ElementType dtype(size_t index) const override {
    return is_integer_type(tensors_[index].dtype) ? tensors_[index].dtype : ElementType::kF32;
  }

  Status read_raw(size_t index, std::span<std::byte> out) override {
    const DcpTensor& t = tensors_[index];
    const size_t item = element_size(t.dtype);
    if (!is_integer_type(t.dtype) || out.size() != static_cast<uint64_t>(specs_[index].numel()) * item) {
      return invalid_argument("DCP tensor '" + t.name + "': read_raw needs an integer tensor and exactly its bytes");
    }
    for (size_t c = 0; c < t.chunks.size(); ++c) {
      TZ_ASSIGN_OR_RETURN(const Chunk* chunk, open_chunk(index, c));
      std::vector<std::byte> bytes(chunk->tensor.numel * item);
      TZ_RETURN_IF_ERROR(chunk->file.read_bytes(chunk->tensor, bytes));
      TZ_RETURN_IF_ERROR(for_each_run(t.shape, t.chunks[c], [&](uint64_t full, uint64_t local, uint64_t n) -> Status {
        std::copy_n(bytes.data() + local * item, n * item, out.data() + full * item);
        return {};
      }));
    }
    return {};
  }

 private:
  struct Chunk {
    TorchFile file;
    TorchTensor tensor;
  };

  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    const DcpTensor& t = tensors_[index];
    const uint64_t end = first + out.size();
    for (size_t c = 0; c < t.chunks.size(); ++c) {
      const Chunk* chunk = nullptr;
      TZ_RETURN_IF_ERROR(for_each_run(t.shape, t.chunks[c], [&](uint64_t full, uint64_t local, uint64_t n) -> Status {
        const uint64_t lo = std::max(first, full), hi = std::min(end, full + n);
        if (lo >= hi) return {};
        if (chunk == nullptr) {
          TZ_ASSIGN_OR_RETURN(chunk, open_chunk(index, c));
        }
        return chunk->file.read_fp32(chunk->tensor, local + (lo - full), out.subspan(lo - first, hi - lo));
      }));
    }
    return {};
  }

  // Chunk `c` of tensor `index`, opened and checked against the metadata. One chunk is open at a
  // time (one file descriptor, however many ranks wrote the checkpoint); reads visit a tensor's
  // chunks in order, so each is opened once per read piece.
  Result<const Chunk*> open_chunk(size_t index, size_t c) {
    if (open_ && open_index_ == index && open_chunk_ == c) return &*open_;
    open_.reset();
    const DcpTensor& t = tensors_[index];
    const DcpChunk& meta = t.chunks[c];
    TZ_ASSIGN_OR_RETURN(TorchFile file, TorchFile::open_range(dir_ + "/" + meta.file, meta.offset, meta.length));
    TZ_ASSIGN_OR_RETURN(TorchTensor tensor, file.tensor(file.root(), "chunk of '" + t.name + "'"));
    if (tensor.shape != meta.sizes || tensor.dtype != t.dtype) {
      return corrupt(file.path() + ": the chunk of '" + t.name + "' holds a " + element_type_name(tensor.dtype) +
                     " tensor of another shape than .metadata gives it (" + element_type_name(t.dtype) +
                     "): the files come from different saves");
    }
    open_.emplace(Chunk{std::move(file), std::move(tensor)});
    open_index_ = index;
    open_chunk_ = c;
    return &*open_;
  }

  std::string dir_;
  std::vector<DcpTensor> tensors_;
  std::vector<TensorSpec> specs_;
  std::string config_;
  std::vector<std::pair<std::string, std::string>> no_aliases_;
  std::optional<Chunk> open_;
  size_t open_index_ = 0;
  size_t open_chunk_ = 0;
};

std::string read_text_if_present(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every chunk's byte range must lie inside its file: checked once per file at open.
Status check_ranges(const std::string& dir, const std::vector<DcpTensor>& tensors) {
  std::map<std::string, uint64_t> sizes;
  for (const DcpTensor& t : tensors) {
    for (const DcpChunk& c : t.chunks) {
      auto it = sizes.find(c.file);
      if (it == sizes.end()) {
        std::error_code ec;
        const uint64_t size = fs::file_size(dir + "/" + c.file, ec);
        if (ec) return not_found(dir + "/" + c.file + " (named by .metadata for '" + t.name + "'): " + ec.message());
        it = sizes.emplace(c.file, size).first;
      }
      if (c.offset > it->second || c.length > it->second - c.offset) {
        return corrupt(dir + "/" + c.file + ": byte " + std::to_string(it->second) +
                       ": the file ends inside the chunk of '" + t.name + "' that .metadata places at bytes [" +
                       std::to_string(c.offset) + ", +" + std::to_string(c.length) + ") (truncated file?)");
      }
    }
  }
  return {};
}

}  // namespace

bool is_dcp_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir + "/.metadata", ec)) return false;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".distcp") return true;
  }
  return false;
}

Result<std::unique_ptr<ConsolidationSource>> open_dcp_checkpoint(const std::string& dir, const std::string& prefix) {
  TZ_ASSIGN_OR_RETURN(DcpMetadata meta, read_dcp_metadata(dir + "/.metadata"));
  std::vector<DcpTensor> kept;
  for (DcpTensor& t : meta.tensors) {
    if (!t.name.starts_with(prefix)) continue;
    t.name.erase(0, prefix.size());
    kept.push_back(std::move(t));
  }
  if (kept.empty()) {
    return not_found(dir + "/.metadata: no tensor" + (prefix.empty() ? std::string() : " named '" + prefix + "...'") +
                     " among its " + std::to_string(meta.tensors.size()) + " tensors");
  }
  TZ_RETURN_IF_ERROR(check_ranges(dir, kept));
  return std::unique_ptr<ConsolidationSource>(
      std::make_unique<DcpSource>(dir, std::move(kept), read_text_if_present(dir + "/config.json")));
}

}  // namespace tierzero::checkpoint
