#include "engine/optim/schedules.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tierzero::engine {

Status validate(const LossScalerConfig& c) {
  if (!std::isfinite(c.static_scale) || c.static_scale < 0) {
    return invalid_argument("fp16.loss_scale must be 0 (dynamic) or a finite positive scale, got " +
                            std::to_string(c.static_scale));
  }
  if (c.static_scale > 0) return {};
  if (c.initial_scale_power < 0 || c.initial_scale_power > 1000) {
    return invalid_argument("fp16.initial_scale_power must be in [0, 1000] (the scale starts at 2^power), got " +
                            std::to_string(c.initial_scale_power));
  }
  if (c.scale_window < 1) {
    return invalid_argument("fp16.loss_scale_window must be a positive integer, got " + std::to_string(c.scale_window));
  }
  if (c.hysteresis < 1) {
    return invalid_argument("fp16.hysteresis must be a positive integer, got " + std::to_string(c.hysteresis));
  }
  if (!std::isfinite(c.min_scale) || c.min_scale <= 0) {
    return invalid_argument("fp16.min_loss_scale must be finite and > 0, got " + std::to_string(c.min_scale));
  }
  return {};
}

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config),
      dynamic_(config.static_scale == 0),
      cur_scale_(dynamic_ ? std::ldexp(1.0, config.initial_scale_power) : config.static_scale),
      cur_hysteresis_(config.hysteresis) {}

Result<LossScaler> LossScaler::create(const LossScalerConfig& config) {
  TZ_RETURN_IF_ERROR(validate(config));
  return LossScaler(config);
}

Status LossScaler::update(bool overflow) {
  if (!dynamic_) return {};
  if (overflow) {
    if (config_.hysteresis == 1 || cur_hysteresis_ == 1) {
      if (cur_scale_ == config_.min_scale) {
        return resource_exhausted("fp16 loss scale is already at fp16.min_loss_scale (" +
                                  std::to_string(config_.min_scale) +
                                  ") and the gradients still overflow: lower fp16.min_loss_scale, lower the lr, or "
                                  "train in bf16");
      }
      cur_scale_ = std::max(cur_scale_ / 2.0, config_.min_scale);
    } else {
      --cur_hysteresis_;
    }
    last_overflow_iter_ = cur_iter_;
  } else {
    if (config_.consecutive_hysteresis) cur_hysteresis_ = config_.hysteresis;
    const int64_t stable_interval = cur_iter_ - last_overflow_iter_ - 1;
    if (stable_interval > 0 && stable_interval % config_.scale_window == 0) {
      if (!config_.consecutive_hysteresis) cur_hysteresis_ = config_.hysteresis;
      cur_scale_ *= 2.0;
    }
  }
  ++cur_iter_;
  return {};
}

nlohmann::json LossScaler::state() const {
  return {{"cur_scale", cur_scale_},
          {"cur_iter", cur_iter_},
          {"last_overflow_iter", last_overflow_iter_},
          {"cur_hysteresis", cur_hysteresis_},
          {"dynamic", dynamic_}};
}

Status LossScaler::load_state(const nlohmann::json& state) {
  auto field = [&](const char* key, auto check) -> Status {
    if (!state.is_object() || !state.contains(key) || !check(state.at(key))) {
      return invalid_argument(std::string("loss scaler state: '") + key + "' is missing or has the wrong type in " +
                              state.dump());
    }
    return {};
  };
  auto is_number = [](const nlohmann::json& j) { return j.is_number(); };
  auto is_integer = [](const nlohmann::json& j) { return j.is_number_integer(); };
  auto is_bool = [](const nlohmann::json& j) { return j.is_boolean(); };
  TZ_RETURN_IF_ERROR(field("cur_scale", is_number));
  TZ_RETURN_IF_ERROR(field("cur_iter", is_integer));
  TZ_RETURN_IF_ERROR(field("last_overflow_iter", is_integer));
  TZ_RETURN_IF_ERROR(field("cur_hysteresis", is_integer));
  TZ_RETURN_IF_ERROR(field("dynamic", is_bool));
  if (state.at("dynamic").get<bool>() != dynamic_) {
    return invalid_argument(std::string("loss scaler state: 'dynamic' is ") + (dynamic_ ? "false" : "true") +
                            " in the checkpoint but fp16.loss_scale makes this run " +
                            (dynamic_ ? "dynamic" : "static") + "; use the checkpoint's fp16 settings");
  }
  cur_scale_ = state.at("cur_scale").get<double>();
  cur_iter_ = state.at("cur_iter").get<int64_t>();
  last_overflow_iter_ = state.at("last_overflow_iter").get<int64_t>();
  cur_hysteresis_ = state.at("cur_hysteresis").get<int>();
  return {};
}

}  // namespace tierzero::engine
