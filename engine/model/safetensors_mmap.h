// A minimal read-only safetensors mapping for loading HF weights, private to engine/model.
// It checks what loading needs to stay in bounds (header length, JSON, dtype names, shape x item
// size == byte range, ranges inside the data section) and nothing more. The full validating reader
// is checkpoint/safetensors.h (checkpoint::SafetensorsFile, same shape of API); switch to it once
// tierzero_checkpoint builds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace tierzero::engine {

struct MappedTensor {
  std::string name;
  std::string dtype;  // safetensors dtype name: "F32", "BF16", "F16", "F64", "I64", ...
  std::vector<int64_t> shape;
  const std::byte* data = nullptr;  // into the mapping; valid while the MappedSafetensors lives
  uint64_t bytes = 0;
};

class MappedSafetensors {
 public:
  // Maps the file at `path` read-only and parses its header. Errors (kNotFound, kIo, kCorrupt)
  // name the path and, where one is at fault, the tensor.
  static Result<std::unique_ptr<MappedSafetensors>> open(const std::string& path);
  ~MappedSafetensors();
  MappedSafetensors(const MappedSafetensors&) = delete;
  MappedSafetensors& operator=(const MappedSafetensors&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<MappedTensor>& tensors() const { return tensors_; }

 private:
  MappedSafetensors(std::string path, void* map, size_t map_bytes)
      : path_(std::move(path)), map_(map), map_bytes_(map_bytes) {}
  Status parse_header();

  std::string path_;
  void* map_;
  size_t map_bytes_;
  std::vector<MappedTensor> tensors_;
};

// Item size in bytes of a safetensors dtype name, or 0 when tierzero does not load it.
size_t safetensors_item_size(const std::string& dtype);

}  // namespace tierzero::engine
