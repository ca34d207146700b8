// The fp16 loss scaler with DeepSpeed's semantics (deepspeed/runtime/fp16/loss_scaler.py:
// LossScaler for a static scale, DynamicLossScaler otherwise).
//
// Dynamic rules, per update(overflow):
//   overflow:  if hysteresis == 1 or cur_hysteresis == 1: scale = max(scale / 2, min_scale)
//              (an overflow while scale == min_scale is an error, as DeepSpeed raises);
//              else cur_hysteresis -= 1. Then last_overflow_iter = cur_iter.
//   no overflow: if consecutive_hysteresis, cur_hysteresis = hysteresis. If
//              stable = cur_iter - last_overflow_iter - 1 is > 0 and a multiple of scale_window,
//              scale *= 2 (and, without consecutive_hysteresis, cur_hysteresis = hysteresis).
//   then cur_iter += 1.
// A step whose gradients overflowed is skipped by the caller (no optimizer or scheduler step).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tierzero::engine {

// The ds_config "fp16" loss-scale knobs. static_scale > 0 fixes the scale (DeepSpeed's
// loss_scale); 0 scales dynamically starting at 2^initial_scale_power.
struct LossScalerConfig {
  double static_scale = 0.0;            // fp16.loss_scale
  int initial_scale_power = 16;         // fp16.initial_scale_power
  int64_t scale_window = 1000;          // fp16.loss_scale_window
  int hysteresis = 2;                   // fp16.hysteresis (DeepSpeed's delayed_shift)
  bool consecutive_hysteresis = false;  // fp16.consecutive_hysteresis
  double min_scale = 1.0;               // fp16.min_loss_scale

  // A scaler that always returns 1 (bf16 and fp32 training).
  static LossScalerConfig unit() { return LossScalerConfig{.static_scale = 1.0}; }
};

// Checks the knobs as DeepSpeed's validators do: static_scale >= 0 and finite, window >= 1,
// hysteresis >= 1, min_scale > 0, 2^initial_scale_power finite. Messages name the "fp16" key.
Status validate(const LossScalerConfig& config);

class LossScaler {
 public:
  // Builds a scaler; kInvalidArgument as validate() says.
  static Result<LossScaler> create(const LossScalerConfig& config);

  // The factor the loss is multiplied by before backward (gradients are divided by it).
  double scale() const { return cur_scale_; }
  bool dynamic() const { return dynamic_; }
  // Records whether this step's gradients held inf/nan and adjusts the scale (a static scaler
  // ignores it). kResourceExhausted when a dynamic scaler overflows at min_scale: training
  // cannot continue (DeepSpeed: "Current loss scale already at minimum").
  Status update(bool overflow);

  // Steps seen, the last overflowing one (-1: none) and the hysteresis left.
  int64_t cur_iter() const { return cur_iter_; }
  int64_t last_overflow_iter() const { return last_overflow_iter_; }
  int cur_hysteresis() const { return cur_hysteresis_; }

  // {"cur_scale", "cur_iter", "last_overflow_iter", "cur_hysteresis", "dynamic"}: for checkpoints.
  nlohmann::json state() const;
  // Restores state(); kInvalidArgument naming the key when missing or of the wrong type, or when
  // "dynamic" differs from this scaler's config.
  Status load_state(const nlohmann::json& state);

 private:
  explicit LossScaler(const LossScalerConfig& config);
  LossScalerConfig config_;
  bool dynamic_ = false;
  double cur_scale_ = 1.0;
  int64_t cur_iter_ = 0;
  int64_t last_overflow_iter_ = -1;
  int cur_hysteresis_ = 1;
};

}  // namespace tierzero::engine
