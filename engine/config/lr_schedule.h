// Learning-rate schedules with DeepSpeed's exact formulas (deepspeed/runtime/lr_schedules.py):
// WarmupLR, WarmupDecayLR and WarmupCosineLR.
//
// DeepSpeed's step protocol, kept here: a schedule starts at last_batch_iteration = -1; the
// engine reads lr() for an optimizer step and calls step() after every optimizer step that was
// not skipped for an fp16 overflow. The lr used by the k-th applied step (k = 0, 1, ...) is
// therefore lr_at(k - 1): WarmupLR and WarmupDecayLR start at warmup_min_lr, WarmupCosineLR at 0.
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace tierzero::engine {

enum class LrScheduleType : uint8_t { kWarmupLR, kWarmupDecayLR, kWarmupCosineLR };
enum class WarmupType : uint8_t { kLog, kLinear };

// Returns "WarmupLR", "WarmupDecayLR" or "WarmupCosineLR".
const char* lr_schedule_type_name(LrScheduleType type);
// Returns "log" or "linear".
const char* warmup_type_name(WarmupType type);

// The ds_config "scheduler" block, resolved. Defaults are DeepSpeed's class defaults.
struct LrScheduleConfig {
  LrScheduleType type = LrScheduleType::kWarmupLR;
  double warmup_min_lr = 0.0;       // WarmupLR, WarmupDecayLR
  double warmup_max_lr = 1e-3;      // WarmupLR, WarmupDecayLR (WarmupLR: the optimizer lr if absent)
  int64_t warmup_num_steps = 1000;  // all; > 0; DeepSpeed uses max(2, warmup_num_steps)
  WarmupType warmup_type = WarmupType::kLog;
  int64_t total_num_steps = 0;    // WarmupDecayLR, WarmupCosineLR; > 0 for them
  double warmup_min_ratio = 0.0;  // WarmupCosineLR: lr ratio at step 0
  double cos_min_ratio = 1e-4;    // WarmupCosineLR: lr ratio at the end
  double base_lr = 1e-3;          // WarmupCosineLR: the optimizer's lr the ratios multiply
};

// Checks a config the way DeepSpeed's constructors do (warmup_num_steps > 0, total_num_steps > 0
// where used, finite non-negative rates). The message names the "scheduler.params" key.
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

}  // namespace tierzero::engine
