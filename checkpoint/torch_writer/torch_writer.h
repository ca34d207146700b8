// Writing files torch.load reads, without Python or torch: a pickle writer that emits protocol-2
// opcodes (the ones torch.save uses) for values described by the caller, and the torch.save zip
// around it. Nothing is executed or imported here; a class appears in the file only as the
// `module name` of a GLOBAL opcode the caller asks for.
//
// File layout (torch.save's, PyTorch >= 1.6; read back by checkpoint/torch_format/torch_file.h):
//   PREFIX/data.pkl              the pickle; tensors are torch._utils._rebuild_tensor_v2 calls whose
//                                storage is a persistent id ('storage', torch.<T>Storage, KEY, 'cpu', numel)
//   PREFIX/.format_version "1", PREFIX/.storage_alignment "64", PREFIX/byteorder "little"
//   PREFIX/data/KEY              the raw little-endian bytes of storage KEY (KEY = "0", "1", ...),
//                                each entry's data aligned to 64 bytes as torch aligns it
//   PREFIX/version "3\n"
// Entries are stored (not compressed) with their CRC-32. Files over 4 GiB (ZIP64) are refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::checkpoint {

// Emits a protocol-2 pickle opcode by opcode. The caller pushes values in the order Python's
// pickler would (a call: the callable, then its argument tuple, then reduce()); containers are
// bracketed by begin_* / end_*. Values are not memoised (no PUT/GET): equal values are written
// twice, which unpickles to equal, distinct objects.
class PickleWriter {
 public:
  PickleWriter();  // PROTO 2

  void none();
  void boolean(bool value);
  void integer(int64_t value);         // BININT1 / BININT2 / BININT / LONG1, the smallest that fits
  void real(double value);             // BINFLOAT
  void string(std::string_view utf8);  // BINUNICODE
  void global(std::string_view module, std::string_view name);  // GLOBAL "module\nname\n"
  // Containers: items (dicts: key, value, key, value, ...) between begin and end.
  void begin_dict();     // EMPTY_DICT MARK
  void end_dict();       // SETITEMS
  void begin_list();     // EMPTY_LIST MARK
  void end_list();       // APPENDS
  void begin_tuple();    // MARK
  void mark();           // MARK alone: items then end_dict() / end_list() add to the object below it
                         // (an OrderedDict made by reduce(), as pickle writes a dict subclass)
  void end_tuple();      // TUPLE
  void reduce();         // REDUCE: callable(*args), both on the stack
  void newobj();         // NEWOBJ: cls.__new__(cls, *args)
  void build();          // BUILD: the state on the stack set on the object below it
  void persistent_id();  // BINPERSID: the value on the stack becomes a persistent id
  // `value` as plain pickled data: null None, booleans, integers, floats, strings, arrays as
  // lists, objects as dicts.
  void json(const nlohmann::json& value);

  // STOP, and the bytes. The writer is empty afterwards.
  std::string finish();

 private:
  void op(char code) { out_.push_back(code); }
  template <typename T>
  void little(T value);
  std::string out_;
};

// One torch.save file being described: storages added by tensor(), the pickle written through
// pickle(), then write() puts the zip on disk.
class TorchSaveWriter {
 public:
  // `prefix` is the archive's top-level folder (torch uses the file name without ".pt").
  explicit TorchSaveWriter(std::string prefix) : prefix_(std::move(prefix)) {}

  PickleWriter& pickle() { return pickle_; }
  // Adds a storage holding `bytes` (its own copy) of `dtype` and writes, into the pickle, the
  // tensor torch.save writes for a contiguous CPU tensor of `shape` over all of it:
  // _rebuild_tensor_v2(persistent id, 0, shape, strides, False, OrderedDict()). bytes.size() must
  // be numel(shape) * element_size(dtype) (kInvalidArgument otherwise; torch's storage types
  // exist for F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL only).
  Status tensor(ElementType dtype, const std::vector<int64_t>& shape, std::span<const std::byte> bytes);
  // Finishes the pickle and writes the zip to `path` (created or truncated), flushed and fsynced.
  // kIo naming the path when writing fails; kUnsupported when it would exceed 4 GiB.
  Status write(const std::string& path);

 private:
  std::string prefix_;
  PickleWriter pickle_;
  std::vector<std::vector<std::byte>> storages_;
};

}  // namespace tierzero::checkpoint
