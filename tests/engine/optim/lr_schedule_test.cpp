// LR schedules against references written out independently of lr_schedule.cpp:
// (1) values printed by DeepSpeed 0.19.8's own classes (deepspeed/runtime/lr_schedules.py:
//     WarmupLR / WarmupDecayLR / WarmupCosineLR on a one-parameter torch.optim.SGD, setting
//     last_batch_iteration and calling get_lr()), and (2) the formulas below, restated from that
//     file in double precision.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "engine/optim/schedules.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

LrSchedule make(const LrScheduleConfig& c) { return LrSchedule::create(c).value(); }

TEST(LrSchedule, WarmupLrLogMatchesDeepSpeedValues) {
  LrScheduleConfig c{.type = LrScheduleType::kWarmupLR,
                     .warmup_min_lr = 1e-5,
                     .warmup_max_lr = 3e-4,
                     .warmup_num_steps = 10,
                     .warmup_type = WarmupType::kLog};
  LrSchedule s = make(c);
  const std::pair<int64_t, double> expected[] = {
      {-1, 1e-05},  {0, 1e-05},  {1, 9.729869874255451e-05}, {5, 0.0002356638626112566}, {9, 0.0002999999999999999},
      {10, 0.0003}, {50, 0.0003}};
  for (auto [it, lr] : expected) EXPECT_NEAR(s.lr_at(it), lr, 1e-15) << "iteration " << it;
}

TEST(LrSchedule, WarmupDecayLinearMatchesDeepSpeedValues) {
  LrScheduleConfig c{.type = LrScheduleType::kWarmupDecayLR,
                     .warmup_min_lr = 0.0,
                     .warmup_max_lr = 1e-3,
                     .warmup_num_steps = 10,
                     .warmup_type = WarmupType::kLinear,
                     .total_num_steps = 100};
  LrSchedule s = make(c);
  const std::pair<int64_t, double> expected[] = {{-1, 0.0},    {0, 0.0},   {3, 0.0003}, {10, 0.001},
                                                 {55, 0.0005}, {100, 0.0}, {120, 0.0}};
  for (auto [it, lr] : expected) EXPECT_NEAR(s.lr_at(it), lr, 1e-15) << "iteration " << it;
}

TEST(LrSchedule, WarmupCosineLogMatchesDeepSpeedValues) {
  LrScheduleConfig c{.type = LrScheduleType::kWarmupCosineLR,
                     .warmup_num_steps = 10,
                     .warmup_type = WarmupType::kLog,
                     .total_num_steps = 60,
                     .warmup_min_ratio = 0.1,
                     .cos_min_ratio = 0.05,
                     .base_lr = 2e-4};
  LrSchedule s = make(c);
  const std::pair<int64_t, double> expected[] = {
      {-1, 0.0},   {0, 2e-05},  {4, 0.00014581460078048336}, {10, 0.00019981253920068581}, {30, 0.00012862553928066125},
      {60, 1e-05}, {200, 1e-05}};
  for (auto [it, lr] : expected) EXPECT_NEAR(s.lr_at(it), lr, 1e-15) << "iteration " << it;
}

// DeepSpeed: gamma = log(it + 1) / log(max(2, n)) (log) or it / max(2, n) (linear) while
// it < max(2, n); WarmupLR then 1; WarmupDecayLR then max(0, (T - it) / max(1, T - n)).
double reference_warmup_family(const LrScheduleConfig& c, int64_t it) {
  if (it < 0) return c.warmup_min_lr;
  const double n = std::max<double>(2, static_cast<double>(c.warmup_num_steps));
  const double x = static_cast<double>(it);
  double gamma;
  if (x < n)
    gamma = c.warmup_type == WarmupType::kLog ? std::log(x + 1) / std::log(n) : x / n;
  else if (c.type == LrScheduleType::kWarmupLR)
    gamma = 1.0;
  else
    gamma = std::max(0.0, (static_cast<double>(c.total_num_steps) - x) / std::max(1.0, c.total_num_steps - n));
  return c.warmup_min_lr + (c.warmup_max_lr - c.warmup_min_lr) * gamma;
}

// DeepSpeed WarmupCosineLR.get_lr_ratio(): warmup ratio min + gamma * (1 - min); then
// cos_min + (1 - cos_min) * (1 + cos(pi * min(1, (it - n + 1) / max(1, T - n)))) / 2.
double reference_cosine(const LrScheduleConfig& c, int64_t it) {
  if (it < 0) return 0.0;
  const double n = std::max<double>(2, static_cast<double>(c.warmup_num_steps));
  const double x = static_cast<double>(it);
  if (x < n) {
    const double gamma = c.warmup_type == WarmupType::kLog ? std::log(x + 1) / std::log(n) : x / n;
    return c.base_lr * (c.warmup_min_ratio + gamma * (1 - c.warmup_min_ratio));
  }
  const double progress = std::min(1.0, (x - n + 1) / std::max(1.0, c.total_num_steps - n));
  return c.base_lr *
         std::max(0.0, c.cos_min_ratio + (1 - c.cos_min_ratio) * (1 + std::cos(std::numbers::pi * progress)) / 2);
}

TEST(LrSchedule, EverySchedulerFollowsTheFormulaOverManySteps) {
  for (WarmupType warmup : {WarmupType::kLog, WarmupType::kLinear}) {
    for (int64_t n : {1, 2, 7, 100}) {
      for (LrScheduleType type :
           {LrScheduleType::kWarmupLR, LrScheduleType::kWarmupDecayLR, LrScheduleType::kWarmupCosineLR}) {
        LrScheduleConfig c{.type = type,
                           .warmup_min_lr = 2e-6,
                           .warmup_max_lr = 5e-4,
                           .warmup_num_steps = n,
                           .warmup_type = warmup,
                           .total_num_steps = 250,
                           .warmup_min_ratio = 0.01,
                           .cos_min_ratio = 0.1,
                           .base_lr = 3e-4};
        LrSchedule s = make(c);
        for (int64_t it = -1; it < 300; ++it) {
          const double want =
              type == LrScheduleType::kWarmupCosineLR ? reference_cosine(c, it) : reference_warmup_family(c, it);
          ASSERT_NEAR(s.lr(), want, 1e-12 * std::max(1e-4, want))
              << lr_schedule_type_name(type) << " n=" << n << " it=" << it;
          s.step();
        }
      }
    }
  }
}

TEST(LrSchedule, StateRoundTripsAndResumesTheSameSequence) {
  LrScheduleConfig c{.type = LrScheduleType::kWarmupDecayLR, .warmup_num_steps = 5, .total_num_steps = 40};
  LrSchedule a = make(c);
  for (int i = 0; i < 17; ++i) a.step();
  const nlohmann::json saved = a.state();
  EXPECT_EQ(saved, nlohmann::json({{"last_batch_iteration", 16}}));
  LrSchedule b = make(c);
  ASSERT_OK(b.load_state(nlohmann::json::parse(saved.dump())));
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(a.lr(), b.lr());
    a.step();
    b.step();
  }
}

TEST(LrSchedule, RejectsBadStateAndBadConfig) {
  LrSchedule s = make(LrScheduleConfig{});
  EXPECT_ERROR(s.load_state({{"step", 3}}), ErrorCode::kInvalidArgument, "last_batch_iteration");
  EXPECT_ERROR(LrSchedule::create(LrScheduleConfig{.warmup_num_steps = 0}), ErrorCode::kInvalidArgument,
               "warmup_num_steps");
  EXPECT_ERROR(LrSchedule::create(LrScheduleConfig{.type = LrScheduleType::kWarmupCosineLR, .total_num_steps = 0}),
               ErrorCode::kInvalidArgument, "total_num_steps");
}

}  // namespace
}  // namespace tierzero::engine
