// DeepSpeed ZeRO-1/2/3 checkpoints as a ConsolidationSource, read without Python or torch.
//
// DIR/latest names the tag; DIR/TAG/ holds the torch.save files (`*_model_states.pt`,
// `[bf16_]zero_pp_rank_R_mp_rank_00_optim_states.pt`). Opening parses only the pickles; each
// read_fp32 seeks into the ranks' flat fp32 groups for exactly the elements of one tensor, so
// memory stays at about one tensor whatever the checkpoint weighs. The result equals DeepSpeed's
// zero_to_fp32.py bit for bit (floating buffers widened to fp32, as it does with .float(); integer
// and bool buffers kept as they are, as it keeps them: dtype() names them, read_raw copies them). Every rank file stays open for the source's lifetime (stage 3: two
// descriptors per rank); reads are positional, so read_fp32 may run on any one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/convert/consolidate.h"
#include "common/status.h"

namespace tierzero::checkpoint {

// True when DIR/latest names a folder DIR/TAG that holds a `*_model_states.pt` and a
// `*_optim_states.pt` file. Cheap: reads `latest` and lists one folder; never fails.
bool is_deepspeed_checkpoint(const std::string& dir);

// Opens the DeepSpeed checkpoint DIR/TAG (`tag` empty: the tag in DIR/latest) and plans every
// tensor. Returns kNotFound for missing files or folders, kCorrupt / kUnsupported naming the file,
// byte offset, tensor and rank for malformed zips or pickles, missing rank files, a world size
// that does not match the files, or shapes inconsistent with the partitions. config.json is taken
// from DIR (as Hugging Face's Trainer lays checkpoints out) or else DIR/TAG.
Result<std::unique_ptr<ConsolidationSource>> open_deepspeed_checkpoint(const std::string& dir,
                                                                       const std::string& tag);

}  // namespace tierzero::checkpoint
