// Private: one parser per ds_config section, called by parse_ds_config() in this order
// (the scheduler needs the optimizer's lr). Each reads its keys from `root`, fills its part of
// the config, refuses unknown keys of its own sub-objects (JsonFields::check_unused) and returns
// errors naming the key.
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
// fp16, bf16 (alias bfloat16); "enabled" resolved with --bf16 / --fp16.
Status parse_precision(JsonFields& root, const TrainerFlags& flags, Fp16Config* fp16, Bf16Config* bf16,
                       Warnings* warnings);
// zero_optimization with offload_param and offload_optimizer.
Status parse_zero(JsonFields& root, const ResolveHints& hints, ZeroConfig* out, Warnings* warnings);
// aio.
Status parse_aio(JsonFields& root, nvme::IoConfig* out, Warnings* warnings);
// optimizer; lr, betas, eps and weight_decay resolved with their flags. Without the section:
// *from_flags, and the HF Trainer's AdamW with --lr (refused without it when hints.training).
Status parse_optimizer(JsonFields& root, const ResolveHints& hints, OptimizerConfig* out, bool* from_flags,
                       Warnings* warnings);
// scheduler; `optimizer` supplies the lr WarmupLR and WarmupCosineLR default to. Without the section:
// none (a constant lr), or with `optimizer_from_flags` the HF Trainer's linear schedule.
Status parse_scheduler(JsonFields& root, const ResolveHints& hints, const OptimizerConfig& optimizer,
                       bool optimizer_from_flags, std::optional<LrScheduleConfig>* out, Warnings* warnings);
// activation_checkpointing.
Status parse_activation_checkpointing(JsonFields& root, ActivationCheckpointingConfig* out, Warnings* warnings);
// One warning naming every kWarned registry key present in `root` with a value other than its
// accepted one, each with why it has no effect; none when there is no such key.
void warn_ineffective_keys(const nlohmann::json& root, Warnings* warnings);
// The value at dotted `path` ("zero_optimization.stage") in `root`, or nullptr when a step is absent
// or not an object.
const nlohmann::json* find_path(const nlohmann::json& root, std::string_view path);
// True when `path` is a kWarned registry key: a key DeepSpeed knows that tierzero accepts without
// acting on it (JsonFields::check_unused() leaves it to warn_ineffective_keys()).
bool is_warned_key(std::string_view path);
// The names the registry lists directly under `parent` ("" for the top level): "zero_optimization"
// under "", "offload_optimizer" under "zero_optimization".
std::vector<std::string> registered_children(std::string_view parent);
// tierzero (the extension section); tierzero.data.seq_len from --seq-len when given.
Status parse_tierzero(JsonFields& root, const TrainerFlags& flags, TierzeroConfig* out, Warnings* warnings);
// tierzero.lora (absent: *out stays nullopt); values checked (rank, alpha, dropout, targets, bias).
Status parse_lora(JsonFields& tierzero, std::optional<LoraConfig>* out, Warnings* warnings);
// tierzero.lora as to_json() writes it.
nlohmann::json lora_json(const LoraConfig& lora);
// Every "auto" in `root` that tierzero resolves from a flag or the model (the HF Trainer's, ds_config.h)
// and `hints` leave unresolved: one kInvalidArgument naming each key with the flag that fills it.
Status check_unresolved_autos(const nlohmann::json& root, const ResolveHints& hints);
// A key given twice in one object of the JSON `text`: kInvalidArgument naming each such key's path
// and the lines of both; OK for valid JSON without duplicates (syntax errors are left to the parser).
Status check_duplicate_keys(std::string_view text);
// tierzero.ignore_unknown_keys of `root` (a ds_config object): a list of key paths none of which
// tierzero knows; kInvalidArgument naming the entry otherwise.
Result<IgnoredKeys> read_ignored_keys(const nlohmann::json& root);
// The tierzero state-layout keys against the rest of the config (bf16, the offloaded optimizer, its
// device, the pinned limit): kInvalidArgument naming the key and the fix.
Status check_state_layout(const DsConfig& config);

}  // namespace tierzero::engine::detail
