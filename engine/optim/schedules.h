// The per-step scalars the trainer applies around each optimizer step, with DeepSpeed's exact
// semantics: the learning-rate schedule (WarmupLR, WarmupDecayLR, WarmupCosineLR, and the Hugging
// Face Trainer's linear schedule) and the fp16 loss scale (static or dynamic).
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/common.h"

namespace tierzero::engine {

// ---- Learning-rate schedules -------------------------------------------------------------------
// Learning-rate schedules with DeepSpeed's exact formulas (deepspeed/runtime/lr_schedules.py):
// WarmupLR, WarmupDecayLR and WarmupCosineLR; and kLinear, the schedule the Hugging Face Trainer
// builds by default (transformers' get_linear_schedule_with_warmup: lr * step / max(1, warmup) while
// step < warmup, then lr * max(0, (total - step) / max(1, total - warmup)), step k being the k-th
// optimizer step from 0). WarmupDecayLR with linear warm-up is not that schedule: it warms up over
// max(2, warmup_num_steps) steps and its k-th step takes the warm-up value of step k - 1.
//
// DeepSpeed's step protocol, kept here: a schedule starts at last_batch_iteration = -1; the
// engine reads lr() for an optimizer step and calls step() after every optimizer step that was
// not skipped for an fp16 overflow. The lr used by the k-th applied step (k = 0, 1, ...) is
// therefore lr_at(k - 1): WarmupLR and WarmupDecayLR start at warmup_min_lr, WarmupCosineLR at 0,
// kLinear at 0 (at base_lr without warm-up).

enum class LrScheduleType : uint8_t { kWarmupLR, kWarmupDecayLR, kWarmupCosineLR, kLinear };
enum class WarmupType : uint8_t { kLog, kLinear };

// Returns "WarmupLR", "WarmupDecayLR", "WarmupCosineLR" or "linear" (the HF Trainer's name).
const char* lr_schedule_type_name(LrScheduleType type);
// Returns "log" or "linear".
const char* warmup_type_name(WarmupType type);

// The ds_config "scheduler" block, resolved (kLinear: what the HF Trainer builds without one).
// Defaults are DeepSpeed's class defaults.
struct LrScheduleConfig {
  LrScheduleType type = LrScheduleType::kWarmupLR;
  double warmup_min_lr = 0.0;       // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 1e-3;      // WarmupLR, WarmupDecayLR (WarmupLR: the optimizer lr if absent)
  int64_t warmup_num_steps = 1000;  // all; > 0 (kLinear >= 0); DeepSpeed's use max(2, it)
  WarmupType warmup_type = WarmupType::kLog;
  int64_t total_num_steps = 0;    // WarmupDecayLR, WarmupCosineLR, kLinear; > 0 for them
  double warmup_min_ratio = 0.0;  // WarmupCosineLR: lr ratio at step 0
  double cos_min_ratio = 1e-4;    // WarmupCosineLR: lr ratio at the end
  double base_lr = 1e-3;          // WarmupCosineLR, kLinear: the optimizer's lr the schedule multiplies
};

// Checks a config the way DeepSpeed's constructors do (warmup_num_steps > 0, or >= 0 for kLinear;
// total_num_steps > 0 where used; finite non-negative rates). The message names the
// "scheduler.params" key.
Status validate(const LrScheduleConfig& config);

// A schedule and its position. Copyable; no hidden state beyond last_batch_iteration.
class LrSchedule {
 public:
  // Builds a schedule at last_batch_iteration = -1; kInvalidArgument as validate() says.
  static Result<LrSchedule> create(const LrScheduleConfig& config);

  // The lr DeepSpeed's get_lr() returns when last_batch_iteration == iteration (any value;
  // negative iterations give the pre-start value: warmup_min_lr, or 0 for WarmupCosineLR).
  double lr_at(int64_t iteration) const;
  // lr_at(last_batch_iteration()): the lr for the next optimizer step.
  double lr() const { return lr_at(last_batch_iteration_); }
  // Advances one step (DeepSpeed's scheduler.step()).
  void step() { ++last_batch_iteration_; }
  int64_t last_batch_iteration() const { return last_batch_iteration_; }
  const LrScheduleConfig& config() const { return config_; }

  // {"last_batch_iteration": N}: DeepSpeed's state_dict(), for checkpoints.
  nlohmann::json state() const;
  // Restores state(); kInvalidArgument naming the key when it is missing or not an integer >= -1.
  Status load_state(const nlohmann::json& state);

 private:
  explicit LrSchedule(const LrScheduleConfig& config) : config_(config) {}
  LrScheduleConfig config_;
  int64_t last_batch_iteration_ = -1;
};

// ---- fp16 loss scaler --------------------------------------------------------------------------
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
