// optimizer_summary(): the optimizer and lr schedule a config trains with, in one line for the run
// header, saying where they come from (a run whose ds_config leaves them out must not train at an
// lr nobody chose without a word).
#include <string>

#include <fmt/format.h>

#include "engine/config/ds_config.h"

namespace tierzero::engine {
namespace {

std::string schedule_summary(const DsConfig& c) {
  if (!c.scheduler) return "constant (the ds_config has no scheduler section)";
  const LrScheduleConfig& s = *c.scheduler;
  const char* warmup = warmup_type_name(s.warmup_type);
  switch (s.type) {
    case LrScheduleType::kWarmupLR:
      return fmt::format("WarmupLR: {} warm-up from {:g} to {:g} over {} steps, then constant", warmup, s.warmup_min_lr,
                         s.warmup_max_lr, s.warmup_num_steps);
    case LrScheduleType::kWarmupDecayLR:
      return fmt::format(
          "WarmupDecayLR: {} warm-up from {:g} to {:g} over {} steps, then linear decay to {:g} at step {}", warmup,
          s.warmup_min_lr, s.warmup_max_lr, s.warmup_num_steps, s.warmup_min_lr, s.total_num_steps);
    case LrScheduleType::kWarmupCosineLR:
      return fmt::format(
          "WarmupCosineLR: {} warm-up from {:g} to {:g} over {} steps, then cosine decay to {:g} at step {}", warmup,
          s.warmup_min_ratio * s.base_lr, s.base_lr, s.warmup_num_steps, s.cos_min_ratio * s.base_lr,
          s.total_num_steps);
    case LrScheduleType::kLinear:
      return fmt::format(
          "linear: warm-up from 0 over {} steps (--warmup-steps), then linear decay to 0 at step {} (--steps): the "
          "Hugging Face Trainer's default (get_linear_schedule_with_warmup), as the ds_config has no scheduler section",
          s.warmup_num_steps, s.total_num_steps);
  }
  return "?";
}

}  // namespace

std::string optimizer_summary(const DsConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  std::string line = fmt::format("optimizer {} lr {:g}, betas ({:g}, {:g}), eps {:g}, weight decay {:g}",
                                 optimizer_type_name(o.type), o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  if (o.type == OptimizerType::kAdam)
    line += o.decoupled_weight_decay() ? ", decoupled (adam_w_mode)" : ", added to the gradient (adam_w_mode false)";
  if (c.optimizer_from_flags)
    line += " (the Hugging Face Trainer's AdamW with --lr, as the ds_config has no optimizer section)";
  return line + "; lr schedule " + schedule_summary(c);
}

}  // namespace tierzero::engine
