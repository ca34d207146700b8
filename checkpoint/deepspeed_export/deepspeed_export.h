// A tierzero engine checkpoint written as a DeepSpeed ZeRO-1/2/3 checkpoint that DeepSpeed's
// load_checkpoint() resumes from (same stage, `world_size` data-parallel ranks), pickles written
// by checkpoint/torch_writer (inert: nothing is read back with code execution).
//
// OUT/latest                                           the tag
// OUT/TAG/mp_rank_00_model_states.pt                   stage 1/2 (stage 3: zero_pp_rank_R_mp_rank_00_model_states.pt
//                                                      per rank, the parameters as empty placeholders)
// OUT/TAG/[bf16_]zero_pp_rank_R_mp_rank_00_optim_states.pt   per rank ("bf16_" when the run is bf16)
// OUT/config.json                                      the model's config.json, when the checkpoint has it
// with DeepSpeed 0.19.8's keys, in its order: model states {module (an OrderedDict of the weights in
// the run's dtype, with _metadata), buffer_names, optimizer, param_shapes, frozen_param_shapes,
// shared_params, frozen_param_fragments, lr_scheduler, data_sampler, random_ltd, skipped_steps,
// global_steps, global_samples, dp_world_size, mp_world_size, checkpoint_parallel_dimensions,
// ds_config, ds_version}; optimizer states {optimizer_state_dict, ds_config, ds_version}, whose
// optimizer_state_dict is stage 1/2's (loss_scaler, ..., base_optimizer_state,
// single_partition_of_fp32_groups, zero_stage, group_paddings, ..., param_slice_mappings) or stage 3's
// (zero_stage, loss_scaler, ..., optimizer_state_dict, fp32_flat_groups). The flat groups follow
// transformers' parameter registration order (the order DeepSpeed's optimizer group has when built
// from model.parameters()), which is known for the supported families' names (embed_tokens; per
// layer self_attn q/k/v/o or Phi-3's fused qkv, q/k norms, mlp gate/up/down or Phi-3's fused gate_up,
// the layer norms; norm; lm_head: internal/hf_order.h).
// Memory: the three fp32 states of the whole model (12 bytes a parameter) plus one rank's files.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::checkpoint {

struct DeepSpeedExportOptions {
  uint32_t world_size = 1;                 // DeepSpeed's data-parallel world size that will load it
  ElementType dtype = ElementType::kBF16;  // the run's dtype (kBF16, kF16, kF32): module weights, file names
  nlohmann::json ds_config;                // stored verbatim as the files' ds_config
  // The optimizer's param_groups (torch Adam/AdamW): `lr` is what the next step uses (the LR
  // schedule's value at the saved position; DeepSpeed does not recompute it on load).
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled_weight_decay = true;  // AdamW
  double gradient_clipping = 0.0;      // clip_grad
  int64_t train_batch_size = 1;        // global_samples = iteration * this
  // fp16 dynamic loss scaler knobs (DynamicLossScaler's attributes besides the saved state).
  double scale_factor = 2.0, min_scale = 1.0;
  int64_t scale_window = 1000, delayed_shift = 2;
  bool consecutive_hysteresis = false;
};

struct DeepSpeedExportReport {
  std::string tag;
  uint32_t files = 0;
  uint64_t bytes = 0;
};

// Writes checkpoint `src_tag` of the engine checkpoint `src_dir` (empty: DIR/latest's) into
// `out_dir` (must not exist or be empty) as above. Returns kNotFound / kCorrupt from the engine
// checkpoint reader (checksums checked), kUnsupported for what DeepSpeed's layout here cannot hold
// (stage 0, more than one group, replicated tensors, a parameter name outside the Llama family,
// a file over 4 GiB), kInvalidArgument for a bad option (world size 0, dtype), kIo naming the
// file. OUT/latest is written last (fsynced, renamed into place): a crash before it leaves no
// checkpoint DeepSpeed would load.
Result<DeepSpeedExportReport> export_deepspeed_checkpoint(const std::string& src_dir, const std::string& src_tag,
                                                          const std::string& out_dir,
                                                          const DeepSpeedExportOptions& options);

}  // namespace tierzero::checkpoint
