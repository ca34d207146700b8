// optimizer and scheduler. Optimizer types are matched case-insensitively, as DeepSpeed does;
// DeepSpeed's Adam defaults to adam_w_mode = true (decoupled weight decay). Scheduler params and
// defaults are those of deepspeed/runtime/lr_schedules.py.
#include <algorithm>
#include <cctype>
#include <string>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine::detail {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status read_betas(JsonFields& p, OptimizerConfig* out) {
  if (!p.has("betas") || p.is_auto("betas")) return {};
  const nlohmann::json& betas = p.raw("betas");
  auto in_range = [](const nlohmann::json& b) {
    return b.is_number() && b.get<double>() >= 0.0 && b.get<double>() < 1.0;
  };
  if (!betas.is_array() || betas.size() != 2 || !in_range(betas[0]) || !in_range(betas[1])) {
    return invalid_argument(p.path_of("betas") + " must be two numbers in [0, 1), e.g. [0.9, 0.999]; got " +
                            betas.dump());
  }
  out->beta1 = betas[0].get<double>();
  out->beta2 = betas[1].get<double>();
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
  if (hints.warmup_steps > 0 && (!p.has("warmup_num_steps") || p.is_auto("warmup_num_steps"))) {
    c->warmup_num_steps = hints.warmup_steps;
  }
  TZ_RETURN_IF_ERROR(p.read_int("warmup_num_steps", &c->warmup_num_steps, 1));
  if (c->type == LrScheduleType::kWarmupCosineLR) {
    c->base_lr = optimizer.lr;
    TZ_RETURN_IF_ERROR(p.read_double("warmup_min_ratio", &c->warmup_min_ratio, 0.0, 1.0));
    TZ_RETURN_IF_ERROR(p.read_double("cos_min_ratio", &c->cos_min_ratio, 0.0, 1.0));
  } else {
    // WarmupLR's warmup_max_lr defaults to the optimizer's lr; WarmupDecayLR's to 0.001.
    if (c->type == LrScheduleType::kWarmupLR || p.is_auto("warmup_max_lr")) c->warmup_max_lr = optimizer.lr;
    TZ_RETURN_IF_ERROR(p.read_double("warmup_min_lr", &c->warmup_min_lr, 0.0, kMaxLr));
    TZ_RETURN_IF_ERROR(p.read_double("warmup_max_lr", &c->warmup_max_lr, 0.0, kMaxLr));
  }
  if (c->type == LrScheduleType::kWarmupLR) return {};
  if (!p.has("total_num_steps") || p.is_auto("total_num_steps")) {
    if (hints.total_steps <= 0) {
      return invalid_argument(p.path_of("total_num_steps") + " is required for " + lr_schedule_type_name(c->type) +
                              " (\"auto\" needs the planned number of training steps)");
    }
    c->total_num_steps = hints.total_steps;
  }
  TZ_RETURN_IF_ERROR(p.read_int("total_num_steps", &c->total_num_steps, 1));
  if (c->total_num_steps < c->warmup_num_steps) {
    warnings->push_back(p.path_of("total_num_steps") + " " + std::to_string(c->total_num_steps) +
                        " is less than warmup_num_steps " + std::to_string(c->warmup_num_steps));
  }
  return {};
}

}  // namespace

Status parse_optimizer(JsonFields& root, OptimizerConfig* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields o, root.child("optimizer"));
  if (!root.has("optimizer")) return {};
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
  TZ_ASSIGN_OR_RETURN(JsonFields p, o.child("params"));
  TZ_RETURN_IF_ERROR(p.read_double("lr", &out->lr, 0.0, 1e6));
  TZ_RETURN_IF_ERROR(read_betas(p, out));
  TZ_RETURN_IF_ERROR(p.read_double("eps", &out->eps, 1e-300, 1.0));
  TZ_RETURN_IF_ERROR(p.read_double("weight_decay", &out->weight_decay, 0.0, 1e6));
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
  p.warn_unused(warnings);
  o.warn_unused(warnings);
  return {};
}

Status parse_scheduler(JsonFields& root, const ResolveHints& hints, const OptimizerConfig& optimizer,
                       std::optional<LrScheduleConfig>* out, Warnings* warnings) {
  TZ_ASSIGN_OR_RETURN(JsonFields s, root.child("scheduler"));
  if (!root.has("scheduler")) return {};
  LrScheduleConfig c;
  TZ_ASSIGN_OR_RETURN(c.type, read_schedule_type(s));
  TZ_ASSIGN_OR_RETURN(JsonFields p, s.child("params"));
  TZ_RETURN_IF_ERROR(read_schedule_params(p, hints, optimizer, &c, warnings));
  TZ_RETURN_IF_ERROR(validate(c));
  p.warn_unused(warnings);
  s.warn_unused(warnings);
  *out = c;
  return {};
}

}  // namespace tierzero::engine::detail
