// Export of consolidated 16-bit weights, DeepSpeed's save_16bit_model (with
// stage3_gather_16bit_weights_on_model_save for stage 3): the fp32 master weights, rounded (to
// nearest even) to the training's compute dtype — bf16 or fp16; fp32 when training in fp32 — are
// written by rank 0 as a Hugging Face model directory through checkpoint/'s consolidation writer
// (checkpoint/consolidate.h):
//   config.json                          the model's config.json text, torch_dtype the export's
//   model.safetensors                    or, above max_shard_bytes of tensor data,
//   model-0000i-of-0000N.safetensors + model.safetensors.index.json
// Names are the engine's parameter names, which are Hugging Face's; a tied embedding is written once
// (model.embed_tokens.weight, no lm_head.weight), as transformers writes tied models.
//
// Memory: the weights stream range by range from the ranks' partitions to rank 0's writer
// (master_weights_source.h): rank 0 holds the writer's read-ahead (read_ahead_bytes) and write
// buffers, every rank at most one range of read_piece_bytes on its device; the model is never
// assembled.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine {

struct Export16bitOptions {
  uint64_t max_shard_bytes = 5'000'000'000;  // tensor data per safetensors file (transformers' "5GB")
  uint64_t read_ahead_bytes = 256ull << 20;  // rank 0: weights read ahead of the writer, at most
  uint64_t read_piece_bytes = 256ull << 20;  // fp32 bytes of a parameter moved to rank 0 at a time
                                             // (a multiple of 64)
  bool progress = false;                     // rank 0: a progress bar on stderr
};

// Writes `engine`'s model into `out_dir`, which must not exist or be empty; it appears complete or
// not at all (written under OUT.partial, then renamed). `config_json` is the model's HF config.json
// text (read_model_config_text, or to_hf_json for a config built in code), copied with every other
// key kept and "torch_dtype" (transformers 5's "dtype" when that is the key used) set to the
// export's dtype. A collective: every rank calls it; the status is the same on every rank, rank 0's
// error naming the file.
Status export_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& out_dir,
                          const Export16bitOptions& options = {});

// Fails when `out_dir` exists and is not an empty directory (what export_16bit_model would refuse),
// naming it and the fix: the trainer checks before training, not after it.
Status check_export_dir(const std::string& out_dir);

// Writes the same files into `save_dir`, an engine checkpoint directory, beside `latest` and the
// tag directories — Hugging Face Trainer's layout of a DeepSpeed checkpoint, so from_pretrained
// and `tierzero convert` both read the directory. The files are written complete in a staging
// directory first, then each renamed over any earlier save's file of the same name. A collective.
Status save_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& save_dir,
                        const Export16bitOptions& options = {});

}  // namespace tierzero::engine
