// Consolidation: a sharded checkpoint (any ConsolidationSource) to Hugging Face safetensors.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/consolidation_source.h"
#include "checkpoint/dtype.h"
#include "common/status.h"
#include "nvme/io_engine.h"

namespace tierzero::checkpoint {

struct ConvertOptions {
  // nvme's defaults with 32 pieces in flight, as `tierzero bench io` measures the disk.
  static nvme::IoConfig default_io() {
    nvme::IoConfig io;
    io.queue_depth = 32;
    return io;
  }
  DType dtype = DType::kBF16;                 // floats: F32, F16 or BF16 (round to nearest even)
  uint64_t max_shard_bytes = 5'000'000'000;   // tensor data per output file (transformers' "5GB")
  uint64_t read_ahead_bytes = 256ull << 20;   // the read-ahead ring
  uint64_t read_piece_bytes = 256ull << 20;   // most fp32 bytes of a tensor read at a time
  uint64_t write_buffer_bytes = 16ull << 20;  // per nvme write buffer
  uint32_t write_buffers = 4;                 // in flight while the next one fills
  nvme::IoConfig io = default_io();           // how output is written
  bool progress = true;                       // a progress bar on stderr
};

struct ConvertReport {
  size_t tensors = 0;
  size_t files = 0;            // safetensors shards
  uint64_t tensor_bytes = 0;   // data bytes (the index's total_size)
  uint64_t file_bytes = 0;     // bytes written, headers included
  double seconds = 0;
  double finish_seconds = 0;   // of which, after the last tensor was handed to the writer: the last
                               // writes in flight, fdatasync, index, rename, directory fsyncs
};

// Writes every tensor of `source` to `out_dir` as safetensors shards: floating-point tensors
// rounded to options.dtype, integer and bool tensors copied with their dtype kept
// (model-0000i-of-0000N.safetensors + model.safetensors.index.json, or one model.safetensors),
// plus config.json when the source has one (its dtype key set to the output dtype, with_torch_dtype). `out_dir` must not exist or be empty. Everything is
// written under `out_dir` + ".partial", fsynced, and renamed to `out_dir` only when complete; on
// failure the partial directory is removed, so `out_dir` never holds a partial result.
// Reading, converting and writing overlap: a reader thread fills tensors ahead while the caller's
// thread converts them (on every core, oneTBB) straight into the nvme engine's write buffers.
// Peak memory: read_ahead_bytes (one ring, allocated once; grown only to hold the largest integer
// tensor, which is read whole) plus write_buffers * write_buffer_bytes, whatever the model size.
Result<ConvertReport> consolidate_to_safetensors(ConsolidationSource& source, const std::string& out_dir,
                                                 const ConvertOptions& options);

// `config_json` (a Hugging Face config.json) with its dtype key -- "dtype" where the file has one
// (transformers 5), else "torch_dtype" -- set to `dtype`'s name ("bfloat16", "float16", "float32"),
// other keys kept in order. kCorrupt when the text is not a JSON object.
Result<std::string> with_torch_dtype(const std::string& config_json, DType dtype);

// Parses "bf16", "fp16" / "f16", "fp32" / "f32" (case insensitive) to a dtype.
Result<DType> parse_output_dtype(const std::string& text);

}  // namespace tierzero::checkpoint
