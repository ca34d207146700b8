// Private: one parser per ds_config section, called by parse_ds_config() in this order
// (the scheduler needs the optimizer's lr). Each reads its keys from `root`, fills its part of
// the config, adds warnings for unknown keys of its own sub-objects and returns errors naming
// the key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/config/ds_config.h"
#include "engine/config/internal/json_fields.h"

namespace tierzero::engine::detail {

using Warnings = std::vector<std::string>;

// train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps.
Status parse_batch(JsonFields& root, const ResolveHints& hints, BatchConfig* out);
// fp16, bf16 (alias bfloat16).
Status parse_precision(JsonFields& root, Fp16Config* fp16, Bf16Config* bf16, Warnings* warnings);
// zero_optimization with offload_param and offload_optimizer.
Status parse_zero(JsonFields& root, const ResolveHints& hints, ZeroConfig* out, Warnings* warnings);
// aio.
Status parse_aio(JsonFields& root, nvme::IoConfig* out, Warnings* warnings);
// optimizer.
Status parse_optimizer(JsonFields& root, OptimizerConfig* out, Warnings* warnings);
// scheduler; `optimizer` supplies the lr WarmupLR and WarmupCosineLR default to.
Status parse_scheduler(JsonFields& root, const ResolveHints& hints, const OptimizerConfig& optimizer,
                       std::optional<LrScheduleConfig>* out, Warnings* warnings);
// activation_checkpointing.
Status parse_activation_checkpointing(JsonFields& root, ActivationCheckpointingConfig* out, Warnings* warnings);
// One warning per kWarned registry key present in `root` with a value other than its accepted one.
void warn_ineffective_keys(const nlohmann::json& root, Warnings* warnings);
// tierzero (the extension section).
Status parse_tierzero(JsonFields& root, TierzeroConfig* out, Warnings* warnings);
// The tierzero state-layout keys against the rest of the config (bf16, the offloaded optimizer, its
// device, the pinned limit): kInvalidArgument naming the key and the fix.
Status check_state_layout(const DsConfig& config);

}  // namespace tierzero::engine::detail
