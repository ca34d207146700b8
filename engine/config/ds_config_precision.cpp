// fp16 and bf16 (DeepSpeed's precision_config.py keys and defaults).
// "enabled": "auto" takes --bf16 / --fp16 (train's flags), as the HF Trainer fills it from its own.
#include "engine/config/internal/ds_config_sections.h"
#include "engine/config/internal/flag_values.h"

namespace tierzero::engine::detail {

Status parse_precision(JsonFields& root, const TrainerFlags& flags, Fp16Config* fp16, Bf16Config* bf16,
                       Warnings* warnings) {
  if (flags.bf16 && flags.fp16) return invalid_argument("--bf16 and --fp16 are both given: choose one");
  // Either flag says what both "enabled" keys are; the one given is named in errors.
  const bool given = flags.bf16 || flags.fp16;
  const char* flag_name = flags.bf16 ? "--bf16" : flags.fp16 ? "--fp16" : "--bf16 or --fp16";
  TZ_ASSIGN_OR_RETURN(JsonFields f, root.child("fp16"));
  TZ_RETURN_IF_ERROR(
      resolve_bool(f, "enabled", given ? std::optional<bool>(flags.fp16) : std::nullopt, flag_name, &fp16->enabled));
  TZ_RETURN_IF_ERROR(f.read_bool("auto_cast", &fp16->auto_cast));
  LossScalerConfig& ls = fp16->loss_scaler;
  TZ_RETURN_IF_ERROR(f.read_double("loss_scale", &ls.static_scale, 0, 1e300));
  TZ_RETURN_IF_ERROR(f.read_int("initial_scale_power", &ls.initial_scale_power, 0, 1000));
  TZ_RETURN_IF_ERROR(f.read_int("loss_scale_window", &ls.scale_window, 1));
  TZ_RETURN_IF_ERROR(f.read_int("hysteresis", &ls.hysteresis, 1));
  TZ_RETURN_IF_ERROR(f.read_bool("consecutive_hysteresis", &ls.consecutive_hysteresis));
  TZ_RETURN_IF_ERROR(f.read_double("min_loss_scale", &ls.min_scale, 1e-300, 1e300));
  TZ_RETURN_IF_ERROR(f.check_unused(warnings));

  // DeepSpeed reads "bf16", and "bfloat16" as its older name.
  const char* bf16_key = root.has("bf16") || !root.has("bfloat16") ? "bf16" : "bfloat16";
  if (root.has("bf16") && root.has("bfloat16")) {
    return invalid_argument("both bf16 and bfloat16 are given: they are the same section; keep bf16");
  }
  TZ_ASSIGN_OR_RETURN(JsonFields b, root.child(bf16_key));
  TZ_RETURN_IF_ERROR(
      resolve_bool(b, "enabled", given ? std::optional<bool>(flags.bf16) : std::nullopt, flag_name, &bf16->enabled));
  TZ_RETURN_IF_ERROR(b.check_unused(warnings));

  if (fp16->enabled && bf16->enabled) {
    return invalid_argument(std::string("fp16.enabled and ") + bf16_key +
                            ".enabled are both true: choose one 16-bit format (bf16 needs no loss scaling)");
  }
  return {};
}

}  // namespace tierzero::engine::detail
