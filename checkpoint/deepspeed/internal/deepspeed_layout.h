// DeepSpeed ZeRO-1/2/3 checkpoint layout: which bytes of which rank file make up each tensor of
// the consolidated model, computed exactly as DeepSpeed's zero_to_fp32.py reassembles them.
//
//   order     buffers (rank 0 `module`, names in `buffer_names`), frozen params
//             (`frozen_param_shapes`), trainable params (`param_shapes`); `shared_params` aliases.
//             Stage 1 files carry no frozen_param_shapes: `module`'s other tensors are the frozen
//             params (zero_to_fp32 drops them; they are kept here, as stored).
//   stage 3   param_shapes' sub-groups are merged in order; parameter p (n elements) owns
//             ceil(n/W) elements of every rank's flat fp32 space (the rank's `fp32_flat_groups`
//             concatenated), at the same running offset on every rank; rank r holds elements
//             [r*ceil(n/W), (r+1)*ceil(n/W)) of the padded parameter. Frozen parameters: rank r's
//             `frozen_param_fragments[name]`, concatenated over ranks, first n elements.
//   stage 1/2 group g is the concatenation over ranks of `single_partition_of_fp32_groups[g]`;
//             its parameters follow each other from offset 0 (plus `param_alignment_paddings`
//             when present); the group's total, rounded up to 2*W, must match the parameters'.
//             Frozen parameters: rank 0's `frozen_param_fragments[name]` whole.
// Every count, offset and shape is checked against the tensors actually present; inconsistencies
// are kCorrupt errors naming the file, the tensor and the rank.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/torch_format/torch_file.h"
#include "common/common.h"

namespace tierzero::checkpoint {

// `count` elements of one stored tensor, starting at its element `src_first`, that land at
// element `dst_first` of an output tensor.
struct DeepSpeedPiece {
  uint32_t file = 0;    // index into DeepSpeedFiles::all()
  uint32_t source = 0;  // index into DeepSpeedLayout::sources
  int32_t rank = -1;    // the data-parallel rank that holds it (-1: not partitioned)
  uint64_t src_first = 0;
  uint64_t dst_first = 0;
  uint64_t count = 0;
};

// One rank's flat fp32 partition of one optimizer group (stage 3: `fp32_flat_groups[group]`,
// stage 1/2: `single_partition_of_fp32_groups[group]`), read as DeepSpeedLayout::sources[source].
// Its exp_avg and exp_avg_sq lie in the same file with the same layout.
struct DeepSpeedFlat {
  int rank = 0;
  uint32_t group = 0;
  uint32_t source = 0;
};

struct DeepSpeedLayout {
  int zero_stage = 0;
  int world_size = 0;
  std::vector<TensorSpec> specs;                             // output order
  size_t first_trainable = 0;                                // specs [first_trainable, end) are param_shapes'
  std::vector<DeepSpeedFlat> flats;                          // every rank's flat fp32 groups
  std::vector<int64_t> numels;                               // numel of each spec
  std::vector<std::vector<DeepSpeedPiece>> pieces;           // per spec; they tile [0, numel) exactly
  std::vector<TorchTensor> sources;                          // stored tensors the pieces read
  std::vector<std::pair<std::string, std::string>> aliases;  // alias -> a name in specs
};

// The opened rank files: model states (natural order) then optimizer states (rank order).
struct DeepSpeedFiles {
  std::vector<TorchFile> model;
  std::vector<TorchFile> optim;
  // File index `i` of a DeepSpeedPiece: model files first, then optimizer files.
  const TorchFile& at(uint32_t i) const { return i < model.size() ? model[i] : optim[i - model.size()]; }
};

// Opens every `*_model_states.pt` and `*_optim_states.pt` of the tag folder `tag_dir` (found as
// find_files_with_suffix finds them). kNotFound when a kind is missing; errors of TorchFile::open.
Result<DeepSpeedFiles> open_deepspeed_files(const std::string& tag_dir);

// Computes the layout from the opened files. Checks: stage in 1..3, partition_count equal on every
// rank and equal to the number of optimizer files (kCorrupt "missing rank file" when fewer, "world
// size mismatch" when more), flat groups of consistent count and size across ranks, parameter
// sizes that add up to the partitions exactly, unique names.
Result<DeepSpeedLayout> plan_deepspeed_layout(const DeepSpeedFiles& files);

}  // namespace tierzero::checkpoint
