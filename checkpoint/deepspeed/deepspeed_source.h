// DeepSpeed ZeRO-1/2/3 checkpoints, and the universal checkpoints ds_to_universal.py makes of them,
// as ConsolidationSources, read without Python or torch.
//
// DIR/latest names the tag; DIR/TAG/ holds the torch.save files (`*_model_states.pt`,
// `[bf16_]zero_pp_rank_R_mp_rank_00_optim_states.pt`). Opening parses only the pickles; each
// read_fp32 seeks into the ranks' flat fp32 groups for exactly the elements of one tensor, so
// memory stays at about one tensor whatever the checkpoint weighs. The result equals DeepSpeed's
// zero_to_fp32.py bit for bit (floating buffers widened to fp32, as it does with .float(); integer
// and bool buffers kept as they are, as it keeps them: dtype() names them, read_raw copies them). Every rank file stays
// open for the source's lifetime (stage 3: two descriptors per rank); reads are positional, so read_fp32 may run on any
// one thread at a time.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "common/common.h"

namespace tierzero::checkpoint {

// True when DIR/latest names a folder DIR/TAG that holds a `*_model_states.pt` and a
// `*_optim_states.pt` file. Cheap: reads `latest` and lists one folder; never fails.
bool is_deepspeed_checkpoint(const std::string& dir);

// Opens the DeepSpeed checkpoint DIR/TAG (`tag` empty: the tag in DIR/latest) and plans every
// tensor. Returns kNotFound for missing files or folders, kCorrupt / kUnsupported naming the file,
// byte offset, tensor and rank for malformed zips or pickles, missing rank files, a world size
// that does not match the files, or shapes inconsistent with the partitions. config.json is taken
// from DIR (as Hugging Face's Trainer lays checkpoints out) or else DIR/TAG.
Result<std::unique_ptr<ConsolidationSource>> open_deepspeed_checkpoint(const std::string& dir, const std::string& tag);

// Opens the DeepSpeed checkpoint DIR/TAG (`tag` empty: DIR/latest's) as the training state an engine
// resumes from, behind engine_format's CheckpointReader: a manifest of DeepSpeed's stage and world
// size with one flat group — the trainable parameters (param_shapes) in `order` (empty: DeepSpeed's
// order), states fp32 / exp_avg / exp_avg_sq read from every rank's flat groups and the base
// optimizer's state of the same layout — so read_partition re-partitions them for any world size;
// step from the base optimizer's `step`, loss_scaler ({"cur_scale", "cur_iter",
// "last_overflow_iter", "cur_hysteresis", "dynamic"}, engine/optim's form) from the loss scaler
// object, lr_scheduler verbatim from the model states file, and every rank's rank_state
// {"iteration": global_steps}. Buffers and frozen parameters are not part of it.
// Returns what open_deepspeed_checkpoint returns for bad files; kCorrupt naming the file when a
// flat group has no exp_avg / exp_avg_sq of its size or the ranks' steps differ; kInvalidArgument
// when `order` and the trainable parameters differ (names the first parameter missing on either
// side, or the shape).
Result<std::unique_ptr<CheckpointReader>> open_deepspeed_resume_reader(const std::string& dir, const std::string& tag,
                                                                       std::span<const TensorSpec> order);

// True when DIR is a DeepSpeed universal checkpoint (ds_to_universal.py's output): DIR/latest_universal
// names a folder DIR/TAG holding zero/, or DIR itself holds zero/. Cheap; never fails.
bool is_deepspeed_universal_checkpoint(const std::string& dir);

// Opens the universal checkpoint DIR/TAG (`tag` empty: the tag in DIR/latest_universal, or DIR
// itself when it holds zero/): one tensor per zero/NAME/fp32.pt (its 'param', or its root tensor), in
// zero_to_fp32's order as the copied *_model_states.pt lists it (other folders after, natural-sorted),
// ties from its shared_params. One fp32.pt is open at a time. Returns kNotFound for a missing
// folder or tag, kCorrupt naming the file (and byte, from the zip and pickle readers) for a
// malformed fp32.pt, a missing 'param', or a shape other than the model states file gives.
// config.json is taken from DIR, DIR/TAG or DIR's parent.
Result<std::unique_ptr<ConsolidationSource>> open_deepspeed_universal_checkpoint(const std::string& dir,
                                                                                 const std::string& tag);

}  // namespace tierzero::checkpoint
