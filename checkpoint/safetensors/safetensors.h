// safetensors: reading (mmap, validated, zero copy) and streaming writing, single or sharded.
//
// File layout (https://github.com/huggingface/safetensors):
//   [0, 8)        N, the header length, unsigned 64-bit little endian
//   [8, 8 + N)    UTF-8 JSON object: {name: {"dtype": "F32", "shape": [..], "data_offsets": [b, e]},
//                 ..., "__metadata__": {string: string}}; padded with spaces
//   [8 + N, end)  the data section; each tensor's [b, e) is relative to its start
// A file is valid when N <= 100 MB and lies inside the file, the JSON parses with no duplicate
// name, every dtype is known, numel(shape) * itemsize == e - b, and the ranges sorted by b tile the
// data section exactly (start at 0, no gap, no overlap, end at its end). Every error names the
// file, the tensor and the problem.
//
// Sharded output (Hugging Face convention): model-00001-of-00003.safetensors, ... plus
// model.safetensors.index.json = {"metadata": {"total_size": N}, "weight_map": {name: file}};
// a single shard is named model.safetensors and has no index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "checkpoint/dtype.h"
#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::checkpoint {

// The largest header tierzero (like safetensors itself) accepts.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensorInfo {
  std::string name;
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensorInfo> tensors;  // sorted by begin offset
  std::map<std::string, std::string> metadata;
};

// Parses and validates header JSON `json` of a file whose data section holds `data_bytes` bytes.
// `file` only names the file in error messages. Returns kCorrupt naming the tensor and the rule
// broken (see the layout above).
Result<SafetensorsHeader> parse_safetensors_header(std::string_view json, uint64_t data_bytes, const std::string& file);

// A safetensors file mapped read-only. Views stay valid while the object lives.
class SafetensorsFile {
 public:
  // Maps `path` and validates all of it before returning; errors name the path.
  static Result<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  // The tensor called `name`, or nullptr.
  const SafetensorsTensorInfo* find(std::string_view name) const;
  // The bytes of `tensor` (one of header().tensors), a view into the mapping.
  std::span<const std::byte> data(const SafetensorsTensorInfo& tensor) const;

 private:
  SafetensorsFile(std::string path, const std::byte* map, uint64_t map_bytes);
  std::string path_;
  const std::byte* map_;
  uint64_t map_bytes_;
  uint64_t data_start_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> by_name_;
};

// A tensor to be written: name, dtype, shape (its byte size follows from them).
struct TensorToWrite {
  std::string name;
  ElementType dtype = ElementType::kF32;
  std::vector<int64_t> shape;
  // numel(shape) * itemsize; kInvalidArgument for negative dims, overflow or partial bytes.
  Result<uint64_t> bytes() const;
};

// Returns the header bytes (JSON padded with spaces to a multiple of 8, without the 8-byte
// length) for `tensors` laid out back to back in the given order, with `metadata`.
Result<std::string> build_safetensors_header(const std::vector<TensorToWrite>& tensors,
                                             const std::map<std::string, std::string>& metadata);

class StreamWriter;

// Streams one safetensors file: header first, then each tensor's bytes in declaration order,
// through an nvme::IoEngine (O_DIRECT where the file system allows it) with `buffer_count`
// buffers of `buffer_bytes` so filling one overlaps writing the others. Not thread-safe.
class SafetensorsWriter {
 public:
  struct Options {
    uint64_t buffer_bytes = 16ull << 20;  // a multiple of 4096
    uint32_t buffer_count = 4;            // >= 2
  };
  // Creates (truncates) `path`, preallocates its exact size, and stages the header.
  static Result<std::unique_ptr<SafetensorsWriter>> create(nvme::IoEngine& engine, const std::string& path,
                                                           const std::vector<TensorToWrite>& tensors,
                                                           const std::map<std::string, std::string>& metadata,
                                                           const Options& options);
  ~SafetensorsWriter();

  // Appends the next bytes of tensor data. Appending past the declared total is kInvalidArgument.
  Status append(std::span<const std::byte> bytes);
  // In-place form of append: a writable span of at most `max_bytes` (> 0, and no more than the
  // bytes still declared) in the staging buffer, never empty; fill a prefix and commit() it.
  // kInvalidArgument when `max_bytes` passes the declared total.
  Result<std::span<std::byte>> reserve(uint64_t max_bytes);
  // Appends the first `bytes` bytes of the span reserve() returned.
  Status commit(uint64_t bytes);
  // Writes what is staged, waits for every write, checks that exactly the declared bytes came,
  // and fsyncs. The file is complete and durable when this returns ok.
  Status finish();
  uint64_t file_bytes() const { return file_bytes_; }

 private:
  SafetensorsWriter(std::unique_ptr<StreamWriter> stream, uint64_t file_bytes);
  Status check_room(uint64_t bytes) const;
  std::unique_ptr<StreamWriter> stream_;
  uint64_t file_bytes_;
};

// Which tensors go in which output file.
struct ShardPlan {
  std::vector<std::string> file_names;      // model-00001-of-0000N.safetensors or model.safetensors
  std::vector<std::vector<size_t>> shards;  // indices into the tensor list, per file
  uint64_t total_bytes = 0;                 // sum of tensor data bytes (index "total_size")
};

// Splits `tensors`, in order, into shards of at most `max_shard_bytes` of tensor data, as
// transformers' save_pretrained does: a tensor larger than the limit gets a shard of its own.
Result<ShardPlan> plan_shards(const std::vector<TensorToWrite>& tensors, uint64_t max_shard_bytes);

// model.safetensors.index.json's text for `plan`; empty when the plan has one file.
std::string build_safetensors_index(const std::vector<TensorToWrite>& tensors, const ShardPlan& plan);

}  // namespace tierzero::checkpoint
