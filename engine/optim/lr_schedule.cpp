#include "engine/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace tierzero::engine {
namespace {

Status bad_param(const std::string& key, const std::string& why) {
  return invalid_argument("scheduler.params." + key + " " + why);
}

bool finite_non_negative(double v) { return std::isfinite(v) && v >= 0; }

}  // namespace

const char* lr_schedule_type_name(LrScheduleType type) {
  switch (type) {
    case LrScheduleType::kWarmupLR: return "WarmupLR";
    case LrScheduleType::kWarmupDecayLR: return "WarmupDecayLR";
    case LrScheduleType::kWarmupCosineLR: return "WarmupCosineLR";
    case LrScheduleType::kLinear: return "linear";
  }
  return "?";
}

const char* warmup_type_name(WarmupType type) { return type == WarmupType::kLog ? "log" : "linear"; }

Status validate(const LrScheduleConfig& c) {
  const bool linear = c.type == LrScheduleType::kLinear;  // the HF Trainer's: no warm-up is allowed
  if (linear ? c.warmup_num_steps < 0 : c.warmup_num_steps <= 0) {
    return bad_param("warmup_num_steps", std::string(linear ? "must be >= 0" : "must be a positive integer") +
                                             ", got " + std::to_string(c.warmup_num_steps));
  }
  if (c.type != LrScheduleType::kWarmupLR && c.total_num_steps <= 0) {
    return bad_param("total_num_steps", std::string("must be a positive integer for ") + lr_schedule_type_name(c.type) +
                                            ", got " + std::to_string(c.total_num_steps));
  }
  if (!finite_non_negative(c.warmup_min_lr)) return bad_param("warmup_min_lr", "must be finite and >= 0");
  if (!finite_non_negative(c.warmup_max_lr)) return bad_param("warmup_max_lr", "must be finite and >= 0");
  if (!finite_non_negative(c.base_lr)) return bad_param("base_lr", "must be finite and >= 0");
  if (!(c.warmup_min_ratio >= 0 && c.warmup_min_ratio <= 1)) {
    return bad_param("warmup_min_ratio", "must be in [0, 1]");
  }
  if (!(c.cos_min_ratio >= 0 && c.cos_min_ratio <= 1)) return bad_param("cos_min_ratio", "must be in [0, 1]");
  return {};
}

Result<LrSchedule> LrSchedule::create(const LrScheduleConfig& config) {
  TZ_RETURN_IF_ERROR(validate(config));
  return LrSchedule(config);
}

double LrSchedule::lr_at(int64_t iteration) const {
  const LrScheduleConfig& c = config_;
  if (c.type == LrScheduleType::kLinear) {
    // transformers' _get_linear_schedule_with_warmup_lr_lambda at the HF step: the k-th optimizer
    // step runs at iteration k - 1 here and at step k there.
    const double step = static_cast<double>(std::max<int64_t>(0, iteration + 1));
    const double warmup = static_cast<double>(c.warmup_num_steps);
    const double total = static_cast<double>(c.total_num_steps);
    if (step < warmup) return c.base_lr * (step / std::max(1.0, warmup));
    return c.base_lr * std::max(0.0, (total - step) / std::max(1.0, total - warmup));
  }
  // DeepSpeed: self.warmup_num_steps = max(2, warmup_num_steps).
  const int64_t warmup = std::max<int64_t>(2, c.warmup_num_steps);
  const double it = static_cast<double>(iteration);
  auto warmup_gamma = [&] {
    return c.warmup_type == WarmupType::kLog ? std::log(it + 1) / std::log(static_cast<double>(warmup))
                                             : it / static_cast<double>(warmup);
  };
  if (c.type == LrScheduleType::kWarmupCosineLR) {
    if (iteration < 0) return 0.0;
    double ratio;
    if (iteration < warmup) {
      ratio = c.warmup_min_ratio + warmup_gamma() * (1.0 - c.warmup_min_ratio);
    } else {
      const double real_last_step = static_cast<double>(iteration - warmup + 1);
      const double real_total_steps = static_cast<double>(std::max<int64_t>(1, c.total_num_steps - warmup));
      const double progress = std::min(1.0, real_last_step / real_total_steps);
      const double cosine = (1 + std::cos(std::numbers::pi * progress)) / 2;
      ratio = std::max(0.0, c.cos_min_ratio + (1.0 - c.cos_min_ratio) * cosine);
    }
    return c.base_lr * ratio;
  }
  if (iteration < 0) return c.warmup_min_lr;
  double gamma;
  if (iteration < warmup) {
    gamma = warmup_gamma();
  } else if (c.type == LrScheduleType::kWarmupLR) {
    gamma = 1.0;
  } else {
    gamma = std::max(0.0, static_cast<double>(c.total_num_steps - iteration) /
                              std::max(1.0, static_cast<double>(c.total_num_steps - warmup)));
  }
  return c.warmup_min_lr + (c.warmup_max_lr - c.warmup_min_lr) * gamma;
}

nlohmann::json LrSchedule::state() const { return {{"last_batch_iteration", last_batch_iteration_}}; }

Status LrSchedule::load_state(const nlohmann::json& state) {
  auto it = state.find("last_batch_iteration");
  if (!state.is_object() || it == state.end() || !it->is_number_integer() || it->get<int64_t>() < -1) {
    return invalid_argument("lr scheduler state: 'last_batch_iteration' must be an integer >= -1; got " + state.dump() +
                            " (is this a tierzero/DeepSpeed scheduler state?)");
  }
  last_batch_iteration_ = it->get<int64_t>();
  return {};
}

}  // namespace tierzero::engine
