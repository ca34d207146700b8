// A file written by torch.save (the zip format, PyTorch ≥ 1.6), read without torch.
//
// Layout: a zip of stored entries under one top-level folder named after the archive:
//   PREFIX/data.pkl        the pickled object (protocol 2); tensors are calls of
//                          torch._utils._rebuild_tensor_v2 whose storage is a persistent id
//                          ('storage', torch.<T>Storage, KEY, location, numel)
//   PREFIX/data/KEY        the raw little-endian bytes of storage KEY
//   PREFIX/byteorder       "little" (absent in old files), PREFIX/version, ...
// The pickle is parsed at open; storages stay on disk and are read by offset on demand, so
// memory stays at the size of data.pkl whatever the tensors weigh.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/torch_format/internal/pickle_value.h"
#include "checkpoint/torch_format/internal/zip_reader.h"
#include "common/common.h"

namespace tierzero::checkpoint {

// A tensor found in the pickle: its storage entry, element type, offset and shape, already
// checked to be contiguous and to lie inside its storage.
struct TorchTensor {
  size_t entry = 0;                       // index into the archive's entries()
  ElementType dtype = ElementType::kF32;  // of its storage (torch.FloatStorage: kF32, ...)
  uint64_t storage_offset = 0;            // in elements
  std::vector<int64_t> shape;
  uint64_t numel = 0;
};

class TorchFile {
 public:
  // Opens `path`: reads the zip directory, finds PREFIX/data.pkl and parses it. Errors name the
  // file: kCorrupt / kUnsupported from the zip and pickle readers, kCorrupt when data.pkl is
  // missing or the byte order is not little-endian.
  static Result<TorchFile> open(const std::string& path);
  // Opens the torch.save blob at bytes [offset, offset + size) of `path` (a PyTorch DCP .distcp
  // file holds one per tensor chunk); path() then names the file and the range. Errors as open().
  static Result<TorchFile> open_range(const std::string& path, uint64_t offset, uint64_t size);

  const std::string& path() const { return zip_.path(); }
  // The unpickled object (usually a dict).
  const PyValue& root() const { return doc_.root(); }

  // Interprets `v` as a tensor: torch._utils._rebuild_tensor_v2, _rebuild_parameter(_with_state)
  // or torch._tensor._rebuild_from_type_v2 around one. `what` names it in errors ("fp32_flat_groups[1]").
  // Returns kCorrupt when `v` is anything else (naming what it is), when the storage key has no
  // PREFIX/data/KEY entry, or when the tensor or storage extends past its data; kUnsupported for
  // a non-contiguous tensor or an unknown storage type.
  Result<TorchTensor> tensor(const PyValue& v, const std::string& what) const;

  // Reads elements [first, first + out.size()) of `t` (row-major) into `out`, widened to fp32
  // (exactly for 16-bit floats and small integers; doubles round to nearest, as torch's .float()).
  // Returns kInvalidArgument when the range leaves the tensor, kIo / kCorrupt from the archive.
  Status read_fp32(const TorchTensor& t, uint64_t first, std::span<float> out) const;
  // Copies all of `t`'s stored bytes (little-endian, its own dtype) into `out`, which must hold
  // exactly numel * itemsize bytes (kInvalidArgument otherwise); kIo / kCorrupt from the archive.
  Status read_bytes(const TorchTensor& t, std::span<std::byte> out) const;

 private:
  TorchFile(ZipArchive zip, PickleDocument doc, std::string prefix)
      : zip_(std::move(zip)), doc_(std::move(doc)), prefix_(std::move(prefix)) {}
  static Result<TorchFile> from_zip(ZipArchive zip);
  Result<TorchTensor> rebuild_v2(const PyValue& call, const std::string& what) const;

  ZipArchive zip_;
  PickleDocument doc_;
  std::string prefix_;  // "archive/" — the top-level folder, with its slash
};

// Reads the file `path` as one bare pickle (not a torch.save zip: a PyTorch DCP .metadata file),
// inertly, as TorchFile reads data.pkl. Returns kNotFound / kIo when it cannot be read, kCorrupt when
// it is over `max_bytes` or from the pickle reader ("PATH: byte N (file offset N): reason").
Result<PickleDocument> read_pickle_file(const std::string& path, uint64_t max_bytes);

// Reads a shape: a tuple or list of non-negative ints, or torch.Size(tuple). `what` names it in
// errors. Returns kCorrupt for anything else or when the element count overflows int64.
Result<std::vector<int64_t>> torch_shape(const PyValue& v, const std::string& what);

// Product of `shape` (1 for a scalar); kCorrupt naming `what` for a negative dimension or when
// the product overflows int64.
Result<int64_t> shape_numel(const std::vector<int64_t>& shape, const std::string& what);

}  // namespace tierzero::checkpoint
