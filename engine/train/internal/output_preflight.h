// Private: `train`'s check of its output destinations before step 1 (output_preflight.cpp). Each
// destination — --save, --export, --metrics, --tensorboard, the ds_config's nvme_path directories —
// is created (swap directories must exist), proven writable by a probe file written, fsynced and
// removed, and its file system's free space is compared with the bytes the run plans to write there,
// summed over the destinations that share a file system. A failure names the path, the problem (not
// a directory, cannot be created, not writable, N GiB needed and M GiB free) and the fix — before
// any training, instead of after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/plan/plan.h"
#include "fs/file_system.h"

namespace tierzero::engine::trainer {

// How a destination is written.
enum class OutputKind : uint8_t {
  kDirectory,      // files go into `path` (--save): created with its parents when missing
  kSwapDirectory,  // files go into `path` (an nvme_path), which must exist already
  kStagedBeside,   // `path` is a directory written as PATH.partial beside it, then renamed (--export):
                   // its parent is created and probed
  kFile,           // `path` is a file (--metrics): its parent is created and probed; `path` must not be
                   // a directory
};

struct OutputDestination {
  std::string path;
  std::string what;  // the flag or key it came from, for messages: "--save", "zero_optimization...nvme_path"
  OutputKind kind = OutputKind::kDirectory;
  uint64_t planned_bytes = 0;  // what the run writes there at most at once
  std::string planned_what;    // how planned_bytes was counted: "one checkpoint: 3 fp32 states x 1.2e6 parameters"
};

// Checks every destination through `fs` as the header says, in order; the first problem is the
// error (kInvalidArgument: not a directory / a directory where a file goes; kIo: cannot create or
// write; kOutOfSpace: too little free space), naming the destination's flag and path and the fix.
// `probe_tag` names the probe files (e.g. "rank0"): the same name in every run of that rank, so that
// a probe a killed run left is replaced and removed by the next run's; processes probing the same
// directory at once may remove each other's (a probe found gone counts as removed). The directories
// created stay; the probe files are removed.
Status check_output_destinations(const std::vector<OutputDestination>& destinations, const std::string& probe_tag,
                                 fs::FileSystem& fs);

// The bytes one engine checkpoint of `plan`'s run takes on disk, uncompressed: the state as it lives
// for every parameter — the master 4 (fp32, or a compact one's bf16 weights + int16 residual), each
// Adam moment 4 (fp32), 2 (bf16) or 1 + 4/256 (int8 codes + block scales) — plus 1 MiB for
// manifests and records. `what` gets the count's words.
uint64_t planned_checkpoint_bytes(const Plan& plan, std::string& what);
// The bytes of the 16-bit model `plan`'s run exports: `model_parameters` (the whole model's — a
// LoRA run's plan counts only its adapters, but it exports the merged model) in the training's
// 16-bit dtype (fp32 for an fp32 run), plus 1 MiB for config and tokenizer files. `what` gets the
// count's words.
uint64_t planned_export_bytes(const Plan& plan, int64_t model_parameters, std::string& what);

}  // namespace tierzero::engine::trainer
