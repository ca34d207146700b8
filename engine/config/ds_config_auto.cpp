// check_unresolved_autos(): every "auto" the HF Trainer would fill that this run's flags (or the
// model) leave empty, in one error, so that a Hugging Face Trainer config needs one failed run, not
// one per key. The sections' parsers resolve the same keys (ds_config.h, "auto"); this only names
// what they would refuse.
#include <cctype>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

// "auto" in any case, as JsonFields::is_auto() reads it.
bool is_auto(const nlohmann::json* v) {
  if (v == nullptr || !v->is_string()) return false;
  std::string s = v->get<std::string>();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "auto";
}

// A value other than null and "auto".
bool given(const nlohmann::json* v) { return v != nullptr && !v->is_null() && !is_auto(v); }

}  // namespace

Status check_unresolved_autos(const nlohmann::json& root, const ResolveHints& hints) {
  if (!root.is_object()) return {};
  const TrainerFlags& f = hints.flags;
  std::vector<std::string> missing;  // "KEY is "auto": pass FLAG"
  bool only_flags = true;            // every entry names a flag (the one-entry message says how)
  auto need_flag = [&](std::string_view key, bool resolved, std::string_view flag, std::string_view why = "") {
    if (is_auto(find_path(root, key)) && !resolved)
      missing.push_back(fmt::format("{} is \"auto\": {}pass {}", key, why, flag));
  };
  // The batch triad: an "auto" without its flag is derived from the other two when both are known.
  const bool train = given(find_path(root, "train_batch_size"));
  const bool micro = f.micro_batch_size || given(find_path(root, "train_micro_batch_size_per_gpu"));
  const bool accum = f.gradient_accumulation_steps || given(find_path(root, "gradient_accumulation_steps"));
  need_flag("train_micro_batch_size_per_gpu", f.micro_batch_size || (train && accum), "--micro-batch");
  need_flag("gradient_accumulation_steps", f.gradient_accumulation_steps || (train && micro), "--grad-accum");
  need_flag("gradient_clipping", f.max_grad_norm.has_value(), "--max-grad-norm");
  for (const char* key : {"fp16.enabled", "bf16.enabled", "bfloat16.enabled"})
    need_flag(key, f.bf16 || f.fp16, "--bf16 or --fp16");
  need_flag("optimizer.params.lr", f.lr.has_value(), "--lr");
  need_flag("optimizer.params.betas", f.adam_beta1 && f.adam_beta2, "--adam-beta1 and --adam-beta2");
  need_flag("optimizer.params.eps", f.adam_epsilon.has_value(), "--adam-epsilon");
  need_flag("optimizer.params.weight_decay", f.weight_decay.has_value(), "--weight-decay");
  need_flag("scheduler.params.warmup_num_steps", f.warmup_steps.has_value(), "--warmup-steps");
  const nlohmann::json* schedule = find_path(root, "scheduler.type");
  if (schedule != nullptr && (*schedule == "WarmupDecayLR" || *schedule == "WarmupCosineLR"))
    need_flag("scheduler.params.total_num_steps", hints.total_steps > 0, "--steps N",
              schedule->get<std::string>() + " needs the schedule's length; ");
  need_flag("tierzero.data.seq_len", f.seq_len.has_value(), "--seq-len");
  for (const char* key : {"reduce_bucket_size", "stage3_prefetch_bucket_size", "prefetch_bucket_size",
                          "stage3_param_persistence_threshold", "param_persistence_threshold"}) {
    const std::string path = std::string("zero_optimization.") + key;
    if (!is_auto(find_path(root, path)) || hints.model.hidden_size > 0) continue;
    missing.push_back(path + " is \"auto\", which comes from the model's hidden_size, not known here: give a number");
    only_flags = false;
  }
  if (missing.empty()) return {};
  if (missing.size() == 1) {
    return invalid_argument(missing.front() + (only_flags ? " to tierzero train (the flag the Hugging Face Trainer "
                                                            "fills it from), or give a value"
                                                          : ""));
  }
  return invalid_argument(fmt::format(
      "{} \"auto\" values have nothing to fill them: {} (each flag of tierzero train stands for the Hugging Face "
      "Trainer argument that fills the key; or give the values)",
      missing.size(), fmt::join(missing, "; ")));
}

}  // namespace tierzero::engine::detail
