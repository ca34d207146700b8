#include "checkpoint/dcp/internal/dcp_metadata.h"

#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "checkpoint/torch_format/torch_file.h"

namespace tierzero::checkpoint {
namespace {

constexpr std::string_view kModule = "torch.distributed.checkpoint.metadata";
constexpr std::string_view kFilesystemModule = "torch.distributed.checkpoint.filesystem";
constexpr uint64_t kMaxMetadataBytes = 1ull << 30;

std::optional<ElementType> torch_dtype(const PyValue& v) {
  if (v.kind != PyKind::kGlobal || v.text != "torch") return std::nullopt;
  static constexpr std::pair<std::string_view, ElementType> kTypes[] = {
      {"float32", ElementType::kF32},   {"float64", ElementType::kF64}, {"float16", ElementType::kF16},
      {"bfloat16", ElementType::kBF16}, {"int64", ElementType::kI64},   {"int32", ElementType::kI32},
      {"int16", ElementType::kI16},     {"int8", ElementType::kI8},     {"uint8", ElementType::kU8},
      {"bool", ElementType::kBool},
  };
  for (const auto& [name, type] : kTypes) {
    if (v.name == name) return type;
  }
  return std::nullopt;
}

class MetadataReader {
 public:
  explicit MetadataReader(std::string path) : path_(std::move(path)) {}

  Result<DcpMetadata> read();

 private:
  Status fail(const PyValue& at, const std::string& what) const {
    return corrupt(path_ + ": byte " + std::to_string(at.offset) + ": " + what);
  }
  // The field `name` of dataclass object `obj` (of class kModule.`cls`), which must be `kind`.
  Result<const PyValue*> field(const PyValue& obj, std::string_view cls, std::string_view name,
                               std::optional<PyKind> kind) const;
  Result<std::vector<int64_t>> shape(const PyValue& v, const std::string& what) const;
  Result<int64_t> integer(const PyValue& v, const std::string& what) const;
  Result<DcpTensor> tensor(const std::string& name, const PyValue& meta) const;
  Status attach_storage(const PyValue& storage_data, DcpMetadata& out) const;

  std::string path_;
};

Result<const PyValue*> MetadataReader::field(const PyValue& obj, std::string_view cls, std::string_view name,
                                             std::optional<PyKind> kind) const {
  if (obj.kind != PyKind::kObject || !obj.is_global(kModule, cls)) {
    return fail(obj, obj.describe() + " where a " + std::string(cls) + " is expected");
  }
  const PyValue* v = obj.attribute(name);
  if (v == nullptr) return fail(obj, std::string(cls) + " without its '" + std::string(name) + "' field");
  if (kind && v->kind != *kind) {
    return fail(*v, std::string(cls) + "." + std::string(name) + " is " + v->describe());
  }
  return v;
}

Result<std::vector<int64_t>> MetadataReader::shape(const PyValue& v, const std::string& what) const {
  auto s = torch_shape(v, what);
  if (!s.ok()) return fail(v, s.status().message());
  return s;
}

Result<int64_t> MetadataReader::integer(const PyValue& v, const std::string& what) const {
  if (v.kind != PyKind::kInt || v.integer < 0) return fail(v, what + " is " + v.describe() + ", not a count of bytes");
  return v.integer;
}

Result<DcpTensor> MetadataReader::tensor(const std::string& name, const PyValue& meta) const {
  DcpTensor t;
  t.name = name;
  TZ_ASSIGN_OR_RETURN(const PyValue* props, field(meta, "TensorStorageMetadata", "properties", PyKind::kObject));
  // TensorProperties pickles its fields as a tuple (its __getstate__): dtype first.
  const PyValue* state = props->state;
  if (!props->is_global(kModule, "TensorProperties") || state == nullptr || state->kind != PyKind::kTuple ||
      state->items.empty()) {
    return fail(*props, "'" + name + "': properties is " + props->describe() + " without a (dtype, ...) state");
  }
  const auto dtype = torch_dtype(*state->items[0]);
  if (!dtype) {
    return unsupported(path_ + ": byte " + std::to_string(state->items[0]->offset) + ": '" + name + "' has dtype " +
                       state->items[0]->describe() +
                       "; supported: float64/32/16, bfloat16, int64/32/16/8, uint8, bool");
  }
  t.dtype = *dtype;
  TZ_ASSIGN_OR_RETURN(const PyValue* size, field(meta, "TensorStorageMetadata", "size", std::nullopt));
  TZ_ASSIGN_OR_RETURN(t.shape, shape(*size, "'" + name + "' size"));
  TZ_ASSIGN_OR_RETURN(const PyValue* chunks, field(meta, "TensorStorageMetadata", "chunks", PyKind::kList));
  for (const PyValue* c : chunks->items) {
    DcpChunk chunk;
    TZ_ASSIGN_OR_RETURN(const PyValue* offsets, field(*c, "ChunkStorageMetadata", "offsets", std::nullopt));
    TZ_ASSIGN_OR_RETURN(const PyValue* sizes, field(*c, "ChunkStorageMetadata", "sizes", std::nullopt));
    TZ_ASSIGN_OR_RETURN(chunk.offsets, shape(*offsets, "'" + name + "' chunk offsets"));
    TZ_ASSIGN_OR_RETURN(chunk.sizes, shape(*sizes, "'" + name + "' chunk sizes"));
    if (chunk.offsets.size() != t.shape.size() || chunk.sizes.size() != t.shape.size()) {
      return fail(*c, "'" + name + "' has " + std::to_string(t.shape.size()) + " dimensions but a chunk has " +
                          std::to_string(chunk.offsets.size()) + " offsets and " + std::to_string(chunk.sizes.size()) +
                          " sizes");
    }
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (chunk.offsets[d] > t.shape[d] || chunk.sizes[d] > t.shape[d] - chunk.offsets[d]) {
        return fail(*c, "a chunk of '" + name + "' leaves the tensor in dimension " + std::to_string(d) + " (offset " +
                            std::to_string(chunk.offsets[d]) + " + size " + std::to_string(chunk.sizes[d]) + " > " +
                            std::to_string(t.shape[d]) + ")");
      }
    }
    t.chunks.push_back(std::move(chunk));
  }
  // The chunks must tile the tensor: volumes add up and no two boxes overlap.
  TZ_ASSIGN_OR_RETURN(int64_t numel, shape_numel(t.shape, name));
  int64_t covered = 0;
  for (size_t i = 0; i < t.chunks.size(); ++i) {
    covered += *shape_numel(t.chunks[i].sizes, name);
    for (size_t j = 0; j < i; ++j) {
      bool overlap = true;
      for (size_t d = 0; d < t.shape.size() && overlap; ++d) {
        const auto &a = t.chunks[i], &b = t.chunks[j];
        overlap = a.offsets[d] < b.offsets[d] + b.sizes[d] && b.offsets[d] < a.offsets[d] + a.sizes[d];
      }
      if (overlap && numel > 0)
        return fail(*chunks, "two chunks of '" + name + "' overlap (chunks " + std::to_string(j) + " and " +
                                 std::to_string(i) + ")");
    }
  }
  if (covered != numel) {
    return fail(*chunks, "the chunks of '" + name + "' cover " + std::to_string(covered) + " of its " +
                             std::to_string(numel) + " elements (a rank's chunk is missing)");
  }
  return t;
}

Status MetadataReader::attach_storage(const PyValue& storage_data, DcpMetadata& out) const {
  std::map<std::pair<std::string, std::vector<int64_t>>, DcpChunk*> by_key;
  for (DcpTensor& t : out.tensors) {
    for (DcpChunk& c : t.chunks) by_key[{t.name, c.offsets}] = &c;
  }
  for (const auto& [index, info] : storage_data.entries) {
    TZ_ASSIGN_OR_RETURN(const PyValue* fqn, field(*index, "MetadataIndex", "fqn", PyKind::kString));
    const PyValue* offset = index->attribute("offset");  // absent or None: a BytesStorageMetadata entry
    if (offset == nullptr || offset->kind == PyKind::kNone) continue;
    TZ_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, shape(*offset, "'" + fqn->text + "' storage offset"));
    const auto it = by_key.find({fqn->text, offsets});
    if (it == by_key.end()) continue;  // a tensor left out of state_dict_metadata: nothing reads it
    if (!info->is_global(kFilesystemModule, "_StorageInfo")) {
      return fail(*info, "storage of '" + fqn->text + "' is " + info->describe() + ", not a _StorageInfo");
    }
    const PyValue* rel = info->attribute("relative_path");
    const PyValue* at = info->attribute("offset");
    const PyValue* length = info->attribute("length");
    if (rel == nullptr || rel->kind != PyKind::kString || at == nullptr || length == nullptr) {
      return fail(*info, "_StorageInfo of '" + fqn->text + "' lacks relative_path, offset or length");
    }
    if (rel->text.empty() || rel->text.find('/') != std::string::npos || rel->text == "..") {
      return fail(*rel,
                  "storage file '" + rel->text + "' of '" + fqn->text + "' is not a file inside the checkpoint folder");
    }
    if (const PyValue* tr = info->attribute("transform_descriptors");
        tr != nullptr && tr->kind != PyKind::kNone && !tr->items.empty()) {
      return unsupported(path_ + ": byte " + std::to_string(tr->offset) + ": '" + fqn->text +
                         "' is stored transformed (compressed); save the checkpoint without storage transforms");
    }
    DcpChunk& c = *it->second;
    c.file = rel->text;
    TZ_ASSIGN_OR_RETURN(int64_t o, integer(*at, "storage offset of '" + fqn->text + "'"));
    TZ_ASSIGN_OR_RETURN(int64_t n, integer(*length, "storage length of '" + fqn->text + "'"));
    c.offset = static_cast<uint64_t>(o);
    c.length = static_cast<uint64_t>(n);
  }
  for (const DcpTensor& t : out.tensors) {
    for (const DcpChunk& c : t.chunks) {
      if (c.file.empty()) {
        return fail(storage_data, "no storage_data entry for the chunk of '" + t.name + "' at offsets " +
                                      std::to_string(c.offsets.empty() ? 0 : c.offsets[0]) +
                                      "...: the checkpoint is incomplete");
      }
    }
  }
  return {};
}

Result<DcpMetadata> MetadataReader::read() {
  TZ_ASSIGN_OR_RETURN(PickleDocument doc, read_pickle_file(path_, kMaxMetadataBytes));
  const PyValue& root = doc.root();
  TZ_ASSIGN_OR_RETURN(const PyValue* sd_meta, field(root, "Metadata", "state_dict_metadata", PyKind::kDict));
  TZ_ASSIGN_OR_RETURN(const PyValue* storage, field(root, "Metadata", "storage_data", PyKind::kDict));
  DcpMetadata out;
  for (const auto& [k, v] : sd_meta->entries) {
    if (k->kind != PyKind::kString) return fail(*k, "state_dict_metadata key is " + k->describe());
    if (v->is_global(kModule, "BytesStorageMetadata")) {
      out.non_tensors.push_back(k->text);
      continue;
    }
    TZ_ASSIGN_OR_RETURN(DcpTensor t, tensor(k->text, *v));
    out.tensors.push_back(std::move(t));
  }
  TZ_RETURN_IF_ERROR(attach_storage(*storage, out));
  return out;
}

}  // namespace

Result<DcpMetadata> read_dcp_metadata(const std::string& path) { return MetadataReader(path).read(); }

}  // namespace tierzero::checkpoint
