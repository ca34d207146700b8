// Consolidation: a sharded checkpoint (any ConsolidationSource) to Hugging Face safetensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/dtype.h"
#include "common/common.h"
#include "nvme/io_engine.h"

namespace tierzero::checkpoint {

// ---- The sources consolidation reads -----------------------------------------------------------
// The seam between checkpoint readers and consolidation (`tierzero convert`).
//
// A ConsolidationSource presents a sharded training checkpoint (tierzero's own, or DeepSpeed's
// ZeRO-1/2/3) as a list of whole fp32 tensors. The converter asks for them one at a time, in
// order, so a source needs memory for about one tensor, not for the model. Implementations:
//   - checkpoint/engine_format/engine_checkpoint.h tierzero checkpoints (open_engine_checkpoint_source)
//   - checkpoint/deepspeed/deepspeed_source.h  DeepSpeed checkpoints (open_deepspeed_checkpoint)

// One tensor of the consolidated model: its full (unpartitioned) name and shape.
struct TensorSpec {
  std::string name;            // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // row-major; {} is a scalar (numel 1)
  // Product of `shape` (1 for a scalar). Shapes are validated by the source (no negatives, no
  // overflow), so this never overflows for a TensorSpec a source returns.
  int64_t numel() const;
};

// A sharded checkpoint seen as whole tensors, for consolidation: floating-point tensors as fp32
// (the converter rounds them to the output dtype), integer and bool tensors (module buffers such as
// position ids or step counters) as their stored bytes, copied to the output unchanged.
//
// Threading: the converter calls read_fp32_range from one thread at a time, but that thread may
// differ from the one that opened the source. Indices are read in increasing order in practice;
// a source must still accept any order (it may be slower for random order).
class ConsolidationSource {
 public:
  virtual ~ConsolidationSource() = default;

  // Tensors in output order (zero_to_fp32's order: buffers, frozen, trainable), aliases
  // excluded. Names are unique. The vector is stable for the source's lifetime.
  virtual const std::vector<TensorSpec>& tensors() const = 0;

  // Tied/shared parameters: (alias name, source name) pairs. The source name is one of
  // tensors(); the alias is not. The converter writes the source once and leaves the alias out,
  // as Hugging Face does (the model config keeps tie_word_embeddings).
  virtual const std::vector<std::pair<std::string, std::string>>& aliases() const = 0;

  // Fills `out` with elements [first, first + out.size()) of the fp32 tensor tensors()[index],
  // row-major; a range outside the tensor is kInvalidArgument. A tensor read in increasing ranges
  // streams, and its stored checksums are checked by the time its last element is read. Errors
  // (I/O, corrupt or missing rank files) name the file, the tensor and the rank.
  Status read_fp32_range(size_t index, uint64_t first, std::span<float> out);
  // The whole tensor: `out.size()` must equal tensors()[index].numel() (else kInvalidArgument).
  Status read_fp32(size_t index, std::span<float> out);

  // The dtype tensors()[index] keeps in the output: an integer or bool dtype (I64, I32, I16, I8,
  // U8, BOOL, ...) for tensors copied unchanged with read_raw, else F32: a floating-point tensor
  // read with read_fp32 and converted to the output dtype. The default says F32 for every tensor.
  virtual ElementType dtype(size_t index) const;
  // For a tensor whose dtype(index) is not F32: fills `out` with its little-endian bytes, exactly
  // numel * itemsize of them (kInvalidArgument otherwise). The default is kUnsupported.
  virtual Status read_raw(size_t index, std::span<std::byte> out);

  // The model's config.json text when the checkpoint carries one, else empty. The converter
  // copies it verbatim to OUT/config.json.
  virtual std::string model_config_json() const = 0;

 private:
  // read_fp32_range once its arguments are checked: `index` names a tensor and the range lies
  // inside it.
  virtual Status fill_fp32(size_t index, uint64_t first, std::span<float> out) = 0;
};

// ---- Consolidation ------------------------------------------------------------------------------

struct ConvertOptions {
  // nvme's defaults with 32 pieces in flight, as `tierzero bench io` measures the disk.
  static nvme::IoConfig default_io() {
    nvme::IoConfig io;
    io.queue_depth = 32;
    return io;
  }
  ElementType dtype = ElementType::kBF16;     // floats: F32, F16 or BF16 (round to nearest even)
  uint64_t max_shard_bytes = 5'000'000'000;   // tensor data per output file (transformers' "5GB")
  uint64_t read_ahead_bytes = 256ull << 20;   // the read-ahead ring
  uint64_t read_piece_bytes = 256ull << 20;   // most fp32 bytes of a tensor read at a time
  uint64_t write_buffer_bytes = 16ull << 20;  // per nvme write buffer
  uint32_t write_buffers = 4;                 // in flight while the next one fills
  nvme::IoConfig io = default_io();           // how output is written
  bool progress = true;                       // a progress bar on stderr
  // Beside the weights, what makes OUT load as it is with transformers' Auto* classes:
  std::string config_json;                  // OUT/config.json; empty: the source's model_config_json()
  std::vector<std::string> companion_dirs;  // model directories giving the tokenizer files and
                                            // generation_config.json (collect_companion_files)
};

struct ConvertReport {
  size_t tensors = 0;
  size_t files = 0;           // safetensors shards
  uint64_t tensor_bytes = 0;  // data bytes (the index's total_size)
  uint64_t file_bytes = 0;    // bytes written, headers included
  double seconds = 0;
  double finish_seconds = 0;  // of which, after the last tensor was handed to the writer: the last
                              // writes in flight, fdatasync, index, rename, directory fsyncs
  bool wrote_config = false;  // OUT/config.json written
  std::vector<std::string> tokenizer_files;  // copied from tokenizer_dir
  std::string tokenizer_dir;                 // empty: no companion directory holds a tokenizer
  std::string generation_config_from;        // the directory it was copied from, "config.json" when derived
                                             // from it, empty when none was written
};

// Writes every tensor of `source` to `out_dir` as safetensors shards: floating-point tensors
// rounded to options.dtype, integer and bool tensors copied with their dtype kept
// (model-0000i-of-0000N.safetensors + model.safetensors.index.json, or one model.safetensors),
// plus config.json when options.config_json or the source has one (its dtype key set to the output dtype,
// with_torch_dtype; checked against the tensors before anything is written, check_config_matches), the tokenizer
// files and generation_config.json (collect_companion_files). `out_dir` must
// not exist or be empty. Everything is written under `out_dir` + ".partial", fsynced, and renamed to `out_dir` only
// when complete; on failure the partial directory is removed, so `out_dir` never holds a partial result. Reading,
// converting and writing overlap: a reader thread fills tensors ahead while the caller's thread converts them (on every
// core, oneTBB) straight into the nvme engine's write buffers. Peak memory: read_ahead_bytes (one ring, allocated once;
// grown only to hold the largest integer tensor, which is read whole) plus write_buffers * write_buffer_bytes, whatever
// the model size.
Result<ConvertReport> consolidate_to_safetensors(ConsolidationSource& source, const std::string& out_dir,
                                                 const ConvertOptions& options);

// `config_json` (a Hugging Face config.json) with its dtype key -- "dtype" where the file has one
// (transformers 5), else "torch_dtype" -- set to torch_dtype_name(dtype) ("bfloat16", "float16", ...),
// other keys kept in order. kCorrupt when the text is not a JSON object.
Result<std::string> with_torch_dtype(const std::string& config_json, ElementType dtype);

// ---- Files beside the weights -------------------------------------------------------------------

// A file written beside the weights so that transformers loads the directory as it is.
struct CompanionFile {
  std::string name;      // e.g. "tokenizer.json"
  std::string text;      // its bytes
  std::string from_dir;  // the directory it was copied from; empty: derived from config.json
};

// The tokenizer files (the names transformers' tokenizers save: tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, added_tokens.json, tokenizer.model, vocab.json,
// merges.txt, vocab.txt, chat_template.jinja, ...) present in `dir`; none for an empty `dir`.
std::vector<std::string> tokenizer_files_in(const std::string& dir);

// The files to write beside the weights: every tokenizer file of the first of `dirs` holding any
// (one tokenizer, never a mix of two directories' files), and generation_config.json from the first
// of `dirs` holding one, else derived from `config_json` (generation_config_from; none when
// `config_json` is empty). Empty entries of `dirs` are skipped. Errors name a file that cannot be read.
Result<std::vector<CompanionFile>> collect_companion_files(const std::vector<std::string>& dirs,
                                                           const std::string& config_json);

// Checks that `config_json` describes the model `tensors` hold: where the config has vocab_size and
// hidden_size and the tensors have model.embed_tokens.weight, its shape must be [vocab_size,
// hidden_size]. kInvalidArgument naming both (a config of another model would make from_pretrained
// fail on every weight); ok when there is nothing to compare, kCorrupt when the text is not a JSON object.
Status check_config_matches(const std::string& config_json, const std::vector<TensorSpec>& tensors);

// generation_config.json for a model directory that has none, as transformers'
// GenerationConfig.from_model_config makes it for a decoder-only model: {"_from_model_config": true}
// with config.json's bos_token_id, eos_token_id, pad_token_id and decoder_start_token_id where set
// and not null, and its transformers_version. kCorrupt when `config_json` is not a JSON object.
Result<std::string> generation_config_from(const std::string& config_json);

// ---- LoRA checkpoints ----------------------------------------------------------------------------
// A LoRA run's checkpoint holds only the adapters, "<module>.lora_A.weight" [r, in] and
// "<module>.lora_B.weight" [out, r] (the frozen base is the model directory the run read), and its
// directory holds the PEFT adapter_config.json `train` writes at each save (r, lora_alpha,
// use_rslora, target_modules).

// True when `source` holds LoRA adapters: every tensor is named *.lora_A.weight or *.lora_B.weight.
bool is_lora_checkpoint(const ConsolidationSource& source);

// The merged model of the adapters in `adapters` over the base model directory `model_dir` (its
// model.safetensors, or the shards model.safetensors.index.json names; F32, BF16 or F16): every tensor
// of the base in its order, W + scaling · B A (computed in fp32, the sum over r in order) for each
// targeted "<module>.weight", where scaling = lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora,
// from the adapter_config.json at `adapter_config_path`. model_config_json() is `adapters`'.
// `adapters` must outlive the source. kInvalidArgument naming the tensor when an adapter has no
// base weight or the shapes disagree, or the config's r differs from lora_A's; file errors name the file.
Result<std::unique_ptr<ConsolidationSource>> open_merged_lora_source(ConsolidationSource& adapters,
                                                                     const std::string& adapter_config_path,
                                                                     const std::string& model_dir);

// Writes the adapters of `adapters` as the PEFT adapter directory `out_dir` (which must not exist or
// be empty), as `train` writes one: adapter_config.json (the file at `adapter_config_path`, with
// base_model_name_or_path set to `base_model` when it is not empty) and adapter_model.safetensors
// (fp32, "base_model.model.<name>"), written under `out_dir` + ".partial" and renamed when complete.
// Returns the number of tensors; errors name the file.
Result<size_t> write_peft_adapter(ConsolidationSource& adapters, const std::string& adapter_config_path,
                                  const std::string& base_model, const std::string& out_dir);

// Parses an output dtype as parse_element_type() does ("bf16", "fp16" / "f16", "fp32" / "f32", or
// torch's "bfloat16", "float16", "float32"; case insensitive); kInvalidArgument for any other type.
Result<ElementType> parse_output_dtype(const std::string& text);

}  // namespace tierzero::checkpoint
