// TorchFile::tensor and shape helpers: how torch.save pickles a tensor, checked against the zip.
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "checkpoint/torch_format/torch_file.h"

namespace tierzero::checkpoint {
namespace {

std::optional<ElementType> storage_dtype(const PyValue& type) {
  if (type.kind != PyKind::kGlobal || type.text != "torch") return std::nullopt;
  static constexpr std::pair<std::string_view, ElementType> kTypes[] = {
      {"FloatStorage", ElementType::kF32},     {"DoubleStorage", ElementType::kF64}, {"HalfStorage", ElementType::kF16},
      {"BFloat16Storage", ElementType::kBF16}, {"LongStorage", ElementType::kI64},   {"IntStorage", ElementType::kI32},
      {"ShortStorage", ElementType::kI16},     {"CharStorage", ElementType::kI8},    {"ByteStorage", ElementType::kU8},
      {"BoolStorage", ElementType::kBool},
  };
  for (const auto& [name, dtype] : kTypes) {
    if (type.name == name) return dtype;
  }
  return std::nullopt;
}

Result<int64_t> small_int(const PyValue& v, const std::string& what) {
  if (v.kind != PyKind::kInt) return corrupt(what + " is " + v.describe() + ", expected an int");
  return v.integer;
}

}  // namespace

Result<int64_t> shape_numel(const std::vector<int64_t>& shape, const std::string& what) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return corrupt(what + " has negative dimension " + std::to_string(d));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return corrupt(what + ": element count overflows 64 bits");
    }
    n *= d;
  }
  return n;
}

Result<std::vector<int64_t>> torch_shape(const PyValue& v, const std::string& what) {
  const PyValue* tuple = &v;
  if (v.is_global("torch", "Size") && v.kind == PyKind::kObject && v.args->items.size() == 1) {
    tuple = v.args->items[0];
  }
  if (tuple->kind != PyKind::kTuple && tuple->kind != PyKind::kList) {
    return corrupt(what + " is " + v.describe() + ", expected a shape (torch.Size or tuple of ints)");
  }
  std::vector<int64_t> shape;
  shape.reserve(tuple->items.size());
  for (const PyValue* d : tuple->items) {
    TZ_ASSIGN_OR_RETURN(int64_t dim, small_int(*d, what + " dimension"));
    shape.push_back(dim);
  }
  TZ_RETURN_IF_ERROR(shape_numel(shape, what).status());
  return shape;
}

Result<TorchTensor> TorchFile::tensor(const PyValue& v, const std::string& what) const {
  const std::string where = path() + ": " + what;
  if (v.kind == PyKind::kObject && v.args != nullptr) {
    const auto& a = v.args->items;
    if (v.is_global("torch._utils", "_rebuild_tensor_v2")) return rebuild_v2(v, what);
    if ((v.is_global("torch._utils", "_rebuild_parameter") ||
         v.is_global("torch._utils", "_rebuild_parameter_with_state")) &&
        !a.empty() && a[0]->is_global("torch._utils", "_rebuild_tensor_v2") && a[0]->kind == PyKind::kObject) {
      return rebuild_v2(*a[0], what);
    }
    // _rebuild_from_type_v2(func, type, args, state): func(*args) rebuilt as the subclass `type`.
    if (v.is_global("torch._tensor", "_rebuild_from_type_v2") && a.size() >= 3 &&
        a[0]->is_global("torch._utils", "_rebuild_tensor_v2") && a[2]->kind == PyKind::kTuple) {
      PyValue call;
      call.kind = PyKind::kObject;
      call.callable = a[0];
      call.args = a[2];
      return rebuild_v2(call, what);
    }
  }
  return corrupt(where + " is " + v.describe() +
                 " where a tensor (torch._utils._rebuild_tensor_v2) is expected; the file is not a "
                 "DeepSpeed checkpoint or is damaged");
}

Result<TorchTensor> TorchFile::rebuild_v2(const PyValue& call, const std::string& what) const {
  const std::string where = path() + ": " + what;
  const auto& a = call.args->items;  // (storage, storage_offset, size, stride, requires_grad, hooks[, meta])
  if (a.size() < 4)
    return corrupt(where + ": _rebuild_tensor_v2 has " + std::to_string(a.size()) + " arguments, expected ≥ 4");
  const PyValue* pid = a[0]->kind == PyKind::kPersistentId ? a[0]->args : nullptr;
  if (pid == nullptr || pid->kind != PyKind::kTuple || pid->items.size() != 5 ||
      pid->items[0]->kind != PyKind::kString || pid->items[0]->text != "storage") {
    return corrupt(where + ": storage is " + a[0]->describe() +
                   ", expected a persistent id ('storage', type, key, location, numel)");
  }
  const auto& id = pid->items;
  const auto dtype = storage_dtype(*id[1]);
  if (!dtype) return unsupported(where + ": storage type " + id[1]->describe() + " is not supported");
  if (id[2]->kind != PyKind::kString) return corrupt(where + ": storage key is " + id[2]->describe());
  TZ_ASSIGN_OR_RETURN(int64_t storage_numel, small_int(*id[4], where + " storage numel"));
  const std::string entry_name = prefix_ + "data/" + id[2]->text;
  const ZipEntry* entry = zip_.find(entry_name);
  if (entry == nullptr) {
    return corrupt(where + ": storage key '" + id[2]->text + "' has no zip entry " + entry_name +
                   " (storage missing: the file is incomplete or damaged)");
  }
  const auto item = static_cast<uint32_t>(element_size(*dtype));
  if (storage_numel < 0 || static_cast<uint64_t>(storage_numel) > entry->size / item) {
    return corrupt(where + ": storage '" + id[2]->text + "' claims " + std::to_string(storage_numel) + " " +
                   torch_dtype_name(*dtype) + " elements but its entry holds " + std::to_string(entry->size) +
                   " bytes (storage out of range)");
  }

  TorchTensor t;
  t.entry = static_cast<size_t>(entry - zip_.entries().data());
  t.dtype = *dtype;
  TZ_ASSIGN_OR_RETURN(int64_t offset, small_int(*a[1], where + " storage_offset"));
  TZ_ASSIGN_OR_RETURN(t.shape, torch_shape(*a[2], where + " size"));
  TZ_ASSIGN_OR_RETURN(std::vector<int64_t> stride, torch_shape(*a[3], where + " stride"));
  TZ_ASSIGN_OR_RETURN(int64_t numel, shape_numel(t.shape, where));
  if (stride.size() != t.shape.size()) return corrupt(where + ": stride and size have different ranks");
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && stride[i] != expected) {
      return unsupported(where + " is not contiguous (a strided view); save tensor.contiguous() instead");
    }
    expected *= t.shape[i];
  }
  if (offset < 0 || offset > storage_numel || numel > storage_numel - offset) {
    return corrupt(where + ": elements [" + std::to_string(offset) + ", +" + std::to_string(numel) +
                   ") lie outside storage '" + id[2]->text + "' of " + std::to_string(storage_numel) +
                   " elements (storage out of range)");
  }
  t.storage_offset = static_cast<uint64_t>(offset);
  t.numel = static_cast<uint64_t>(numel);
  return t;
}

}  // namespace tierzero::checkpoint
