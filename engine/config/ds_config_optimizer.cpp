// optimizer and scheduler. Optimizer types are matched case-insensitively, as DeepSpeed does;
// DeepSpeed's Adam defaults to adam_w_mode = true (decoupled weight decay). Scheduler params and
// defaults are those of deepspeed/runtime/lr_schedules.py. Without an optimizer section, the
// optimizer and schedule the Hugging Face Trainer builds (transformers' trainer.py create_optimizer
// and create_scheduler with TrainingArguments' defaults: AdamW, lr_scheduler_type "linear").
#include <algorithm>
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "engine/config/internal/ds_config_sections.h"
#include "engine/config/internal/flag_values.h"

namespace tierzero::engine::detail {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// betas: [beta1, beta2]; "auto" takes --adam-beta1 and --adam-beta2; absent, each flag given fills
// its half; given, each flag given must agree.
Status read_betas(JsonFields& p, const TrainerFlags& flags, OptimizerConfig* out) {
  const std::optional<double> given[2] = {flags.adam_beta1, flags.adam_beta2};
  const char* names[2] = {"--adam-beta1", "--adam-beta2"};
  double* betas_out[2] = {&out->beta1, &out->beta2};
  if (p.is_auto("betas")) {
    for (int i = 0; i < 2; ++i)
      if (!given[i]) return auto_needs_flag(p, "betas", std::string(names[0]) + " and " + names[1]);
  } else if (p.has("betas")) {
    const nlohmann::json& betas = p.raw("betas");
    auto in_range = [](const nlohmann::json& b) {
      return b.is_number() && b.get<double>() >= 0.0 && b.get<double>() < 1.0;
    };
    if (!betas.is_array() || betas.size() != 2 || !in_range(betas[0]) || !in_range(betas[1])) {
      return invalid_argument(p.path_of("betas") + " must be two numbers in [0, 1), e.g. [0.9, 0.999]; got " +
                              betas.dump());
    }
    for (int i = 0; i < 2; ++i) {
      *betas_out[i] = betas[i].get<double>();
      if (given[i] && *given[i] != *betas_out[i])
        return invalid_argument(p.path_of("betas") + " is " + betas.dump() + " in the ds_config but " + names[i] +
                                " gives " + std::to_string(*given[i]) +
                                ": set it \"auto\" to take the flags' values, or drop the flag");
    }
    return {};
  }
  for (int i = 0; i < 2; ++i) {
    if (!given[i]) continue;
    if (*given[i] < 0.0 || *given[i] >= 1.0)
      return invalid_argument(std::string(names[i]) + " must be in [0, 1), got " + std::to_string(*given[i]));
    *betas_out[i] = *given[i];
  }
  return {};
}

Result<LrScheduleType> read_schedule_type(JsonFields& s) {
  if (!s.has("type"))
    return invalid_argument(s.path_of("type") + " is missing: give WarmupLR, WarmupDecayLR or WarmupCosineLR");
  std::string type;
  TZ_RETURN_IF_ERROR(s.read_string("type", &type));
  for (LrScheduleType t :
       {LrScheduleType::kWarmupLR, LrScheduleType::kWarmupDecayLR, LrScheduleType::kWarmupCosineLR}) {
    if (type == lr_schedule_type_name(t)) return t;
  }
  return invalid_argument(s.path_of("type") + " \"" + type +
                          "\" is not supported: use WarmupLR, WarmupDecayLR or WarmupCosineLR");
}

Status read_warmup_type(JsonFields& p, LrScheduleConfig* c, Warnings* warnings) {
  std::string name = "log";
  TZ_RETURN_IF_ERROR(p.read_string("warmup_type", &name));
  if (name == "linear") {
    c->warmup_type = WarmupType::kLinear;
  } else {
    // DeepSpeed logs a warning and uses log for any other name.
    if (name != "log") warnings->push_back(p.path_of("warmup_type") + " \"" + name + "\" is unknown; using \"log\"");
    c->warmup_type = WarmupType::kLog;
  }
  return {};
}

// The keys each schedule's constructor takes; others are reported as unknown.
Status read_schedule_params(JsonFields& p, const ResolveHints& hints, const OptimizerConfig& optimizer,
                            LrScheduleConfig* c, Warnings* warnings) {
  constexpr double kMaxLr = 1e6;
  TZ_RETURN_IF_ERROR(read_warmup_type(p, c, warnings));
  // --warmup-steps 0 fills 1, as the HF Trainer fills max(1, warmup_steps) (DeepSpeed needs at least 1).
  std::optional<int64_t> warmup_steps = hints.flags.warmup_steps;
  if (warmup_steps && *warmup_steps == 0) warmup_steps = 1;
  TZ_RETURN_IF_ERROR(resolve_int(p, "warmup_num_steps", warmup_steps, "--warmup-steps", &c->warmup_num_steps, 1));
  if (c->type == LrScheduleType::kWarmupCosineLR) {
    c->base_lr = optimizer.lr;
    TZ_RETURN_IF_ERROR(p.read_double("warmup_min_ratio", &c->warmup_min_ratio, 0.0, 1.0));
    TZ_RETURN_IF_ERROR(p.read_double("cos_min_ratio", &c->cos_min_ratio, 0.0, 1.0));
  } else {
    // "auto" warmup_min_lr is 0 (the HF Trainer fills 0); warmup_max_lr is the optimizer's lr ("auto",
    // or absent with WarmupLR or with --lr; WarmupDecayLR's own default is 0.001).
    if (p.is_auto("warmup_min_lr")) {
      c->warmup_min_lr = 0.0;
    } else {
      TZ_RETURN_IF_ERROR(p.read_double("warmup_min_lr", &c->warmup_min_lr, 0.0, kMaxLr));
    }
    if (c->type == LrScheduleType::kWarmupLR || hints.flags.lr) c->warmup_max_lr = optimizer.lr;
    if (p.is_auto("warmup_max_lr")) {
      c->warmup_max_lr = optimizer.lr;
    } else {
      TZ_RETURN_IF_ERROR(resolve_double(p, "warmup_max_lr", hints.flags.lr, "--lr", &c->warmup_max_lr, 0.0, kMaxLr));
    }
  }
  if (c->type == LrScheduleType::kWarmupLR) return {};
  if (!p.has("total_num_steps") || p.is_auto("total_num_steps")) {
    if (hints.total_steps <= 0) {
      return invalid_argument(p.path_of("total_num_steps") + (p.has("total_num_steps") ? " is \"auto\"" : " is absent") +
                              ": " + lr_schedule_type_name(c->type) +
                              " needs the schedule's length; pass --steps N to tierzero train (the schedule then "
                              "follows the run), or give a number");
    }
    c->total_num_steps = hints.total_steps;
  } else {
    TZ_RETURN_IF_ERROR(p.read_int("total_num_steps", &c->total_num_steps, 1));
  }
  if (c->total_num_steps < c->warmup_num_steps) {
    warnings->push_back(p.path_of("total_num_steps") + " " + std::to_string(c->total_num_steps) +
                        " is less than warmup_num_steps " + std::to_string(c->warmup_num_steps));
  }
  return {};
}

// No optimizer section: the lr comes from --lr or nowhere (refused for training), and a weight decay
// would not be the HF Trainer's (it exempts biases and norm weights; tierzero's AdamW decays all).
Status check_trainer_optimizer(const ResolveHints& hints) {
  const TrainerFlags& flags = hints.flags;
  if (hints.training && !flags.lr) {
    return invalid_argument(
        "the ds_config has no optimizer section, so nothing sets the learning rate (the Hugging Face Trainer would "
        "take its learning_rate argument, 5e-5 unless given): pass --lr X to tierzero train (the HF Trainer's AdamW "
        "and its linear schedule: warm-up over --warmup-steps, then decay to 0 at --steps), or add an optimizer "
        "section, e.g. \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-4}}");
  }
  if (flags.weight_decay && *flags.weight_decay != 0.0) {
    return invalid_argument(fmt::format(
        "--weight-decay {:g} without an optimizer section in the ds_config: the Hugging Face Trainer's AdamW would "
        "exempt biases and norm weights from the decay, which tierzero's optimizer does not do; add an optimizer "
        "section (DeepSpeed's AdamW decays every parameter, as tierzero does), e.g. \"optimizer\": {{\"type\": "
        "\"AdamW\", \"params\": {{\"lr\": \"auto\", \"weight_decay\": \"auto\"}}}}",
        *flags.weight_decay));
  }
  return {};
}

// The HF Trainer's schedule without a scheduler section: linear warm-up over --warmup-steps (its
// warmup_steps default 0), then linear decay to 0 at max_steps (--steps).
Result<LrScheduleConfig> trainer_schedule(const ResolveHints& hints, const OptimizerConfig& optimizer) {
  if (hints.total_steps <= 0) {
    return invalid_argument(
        "the ds_config has neither an optimizer nor a scheduler section, so the lr follows the Hugging Face "
        "Trainer's linear schedule, which decays to 0 at the last step: pass --steps N to tierzero train, or add a "
        "scheduler section");
  }
  LrScheduleConfig c{.type = LrScheduleType::kLinear,
                     .warmup_num_steps = hints.flags.warmup_steps.value_or(0),
                     .total_num_steps = hints.total_steps,
                     .base_lr = optimizer.lr};
  if (c.warmup_num_steps < 0)
    return invalid_argument("--warmup-steps must be >= 0, got " + std::to_string(c.warmup_num_steps));
  return c;
}

}  // namespace

Status parse_optimizer(JsonFields& root, const ResolveHints& hints, OptimizerConfig* out, bool* from_flags,
                       Warnings* warnings) {
  const TrainerFlags& flags = hints.flags;
  TZ_ASSIGN_OR_RETURN(JsonFields o, root.child("optimizer"));
  *from_flags = !root.has("optimizer");
  if (*from_flags) {
    TZ_RETURN_IF_ERROR(check_trainer_optimizer(hints));
    out->type = OptimizerType::kAdamW;
  } else {
    if (!o.has("type")) return invalid_argument(o.path_of("type") + " is missing: give Adam or AdamW");
    std::string type;
    TZ_RETURN_IF_ERROR(o.read_string("type", &type));
    if (lower(type) == "adam") {
      out->type = OptimizerType::kAdam;
    } else if (lower(type) == "adamw") {
      out->type = OptimizerType::kAdamW;
    } else {
      return invalid_argument(o.path_of("type") + " \"" + type + "\" is not supported: use Adam or AdamW");
    }
  }
  TZ_ASSIGN_OR_RETURN(JsonFields p, o.child("params"));
  TZ_RETURN_IF_ERROR(resolve_double(p, "lr", flags.lr, "--lr", &out->lr, 0.0, 1e6));
  TZ_RETURN_IF_ERROR(read_betas(p, flags, out));
  TZ_RETURN_IF_ERROR(resolve_double(p, "eps", flags.adam_epsilon, "--adam-epsilon", &out->eps, 1e-300, 1.0));
  TZ_RETURN_IF_ERROR(
      resolve_double(p, "weight_decay", flags.weight_decay, "--weight-decay", &out->weight_decay, 0.0, 1e6));
  TZ_RETURN_IF_ERROR(p.read_bool("bias_correction", &out->bias_correction));
  TZ_RETURN_IF_ERROR(p.read_bool("adam_w_mode", &out->adam_w_mode));
  TZ_RETURN_IF_ERROR(p.read_bool("torch_adam", &out->torch_adam));
  bool amsgrad = false;
  TZ_RETURN_IF_ERROR(p.read_bool("amsgrad", &amsgrad));
  if (amsgrad) {
    return invalid_argument(p.path_of("amsgrad") + " true is not supported (no AMSGrad kernel); set it false");
  }
  if (p.has("max_grad_norm")) {
    return invalid_argument(p.path_of("max_grad_norm") +
                            " is not an optimizer parameter (DeepSpeed refuses it too): use the top-level "
                            "gradient_clipping");
  }
  TZ_RETURN_IF_ERROR(p.check_unused(warnings));
  TZ_RETURN_IF_ERROR(o.check_unused(warnings));
  return {};
}

Status parse_scheduler(JsonFields& root, const ResolveHints& hints, const OptimizerConfig& optimizer,
                       bool optimizer_from_flags, std::optional<LrScheduleConfig>* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields s, root.child("scheduler"));
  if (!root.has("scheduler")) {
    if (optimizer_from_flags && hints.flags.lr) {
      TZ_ASSIGN_OR_RETURN(*out, trainer_schedule(hints, optimizer));
      return {};
    }
    if (!hints.flags.warmup_steps) return {};
    return invalid_argument(
        "--warmup-steps needs a scheduler in the ds_config (the lr is constant without one): add e.g. \"scheduler\": "
        "{\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_num_steps\": \"auto\", \"total_num_steps\": "
        "\"auto\"}}, or drop the flag");
  }
  LrScheduleConfig c;
  TZ_ASSIGN_OR_RETURN(c.type, read_schedule_type(s));
  TZ_ASSIGN_OR_RETURN(JsonFields p, s.child("params"));
  TZ_RETURN_IF_ERROR(read_schedule_params(p, hints, optimizer, &c, warnings));
  TZ_RETURN_IF_ERROR(validate(c));
  TZ_RETURN_IF_ERROR(p.check_unused(warnings));
  TZ_RETURN_IF_ERROR(s.check_unused(warnings));
  *out = c;
  return {};
}

}  // namespace tierzero::engine::detail
