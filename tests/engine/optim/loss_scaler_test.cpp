// The loss scaler against sequences printed by DeepSpeed 0.19.8's own DynamicLossScaler
// (deepspeed/runtime/fp16/loss_scaler.py; update_scale() per step, printing cur_scale and
// cur_hysteresis) on the same overflow pattern: init_scale 2^6, scale_window 3, min_scale 1,
// delayed_shift (hysteresis) 2. "ERR" there is DeepSpeed's "Current loss scale already at minimum".
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/optim/schedules.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

struct Expected {
  double scale;
  int hysteresis;
};

constexpr const char* kPattern = "OgggggggOOgOOggggOOOOOOOO";  // O: overflow, g: good step

LossScalerConfig pattern_config(bool consecutive) {
  return LossScalerConfig{.initial_scale_power = 6,
                          .scale_window = 3,
                          .hysteresis = 2,
                          .consecutive_hysteresis = consecutive,
                          .min_scale = 1.0};
}

void expect_sequence(bool consecutive, const std::vector<Expected>& expected, bool ends_in_error) {
  LossScaler s = LossScaler::create(pattern_config(consecutive)).value();
  EXPECT_EQ(s.scale(), 64.0);
  const std::string pattern = kPattern;
  for (size_t i = 0; i < pattern.size(); ++i) {
    Status st = s.update(pattern[i] == 'O');
    if (i == expected.size()) {
      ASSERT_TRUE(ends_in_error) << "step " << i;
      EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted);
      EXPECT_NE(st.message().find("min_loss_scale"), std::string::npos);
      return;
    }
    ASSERT_OK(st) << "step " << i;
    EXPECT_EQ(s.scale(), expected[i].scale) << "step " << i;
    EXPECT_EQ(s.cur_hysteresis(), expected[i].hysteresis) << "step " << i;
  }
  EXPECT_FALSE(ends_in_error);
}

TEST(LossScaler, DynamicMatchesDeepSpeed) {
  expect_sequence(false, {{64, 1},  {64, 1},  {64, 1},  {64, 1}, {128, 2}, {128, 2}, {128, 2}, {256, 2},
                          {256, 1}, {128, 1}, {128, 1}, {64, 1}, {32, 1},  {32, 1},  {32, 1},  {32, 1},
                          {64, 2},  {64, 1},  {32, 1},  {16, 1}, {8, 1},   {4, 1},   {2, 1},   {1, 1}},
                  /*ends_in_error=*/true);
}

TEST(LossScaler, ConsecutiveHysteresisMatchesDeepSpeed) {
  expect_sequence(true, {{64, 1},  {64, 2},  {64, 2},  {64, 2}, {128, 2}, {128, 2}, {128, 2}, {256, 2}, {256, 1},
                         {128, 1}, {128, 2}, {128, 1}, {64, 1}, {64, 2},  {64, 2},  {64, 2},  {128, 2}, {128, 1},
                         {64, 1},  {32, 1},  {16, 1},  {8, 1},  {4, 1},   {2, 1},   {1, 1}},
                  /*ends_in_error=*/false);
}

TEST(LossScaler, DefaultsStartAtTwoToTheSixteen) {
  LossScaler s = LossScaler::create(LossScalerConfig{}).value();
  EXPECT_TRUE(s.dynamic());
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.cur_hysteresis(), 2);
  // DeepSpeed doubles when stable_interval = cur_iter - last_overflow_iter - 1 reaches 1000: the 1001st good step.
  for (int i = 0; i < 1000; ++i) ASSERT_OK(s.update(false));
  EXPECT_EQ(s.scale(), 65536.0);
  ASSERT_OK(s.update(false));
  EXPECT_EQ(s.scale(), 131072.0);
}

TEST(LossScaler, StaticScaleNeverMoves) {
  LossScaler s = LossScaler::create(LossScalerConfig{.static_scale = 128}).value();
  EXPECT_FALSE(s.dynamic());
  for (int i = 0; i < 50; ++i) ASSERT_OK(s.update(i % 3 == 0));
  EXPECT_EQ(s.scale(), 128.0);
  EXPECT_EQ(LossScaler::create(LossScalerConfig::unit()).value().scale(), 1.0);
}

TEST(LossScaler, StateResumesTheSameSequence) {
  LossScaler a = LossScaler::create(pattern_config(false)).value();
  const std::string pattern = "OgggOggggggOgg";
  for (char c : pattern.substr(0, 6)) ASSERT_OK(a.update(c == 'O'));
  LossScaler b = LossScaler::create(pattern_config(false)).value();
  ASSERT_OK(b.load_state(nlohmann::json::parse(a.state().dump())));
  for (char c : pattern.substr(6)) {
    ASSERT_OK(a.update(c == 'O'));
    ASSERT_OK(b.update(c == 'O'));
    EXPECT_EQ(a.state(), b.state());
  }
}

TEST(LossScaler, RejectsBadConfigAndState) {
  struct Case {
    LossScalerConfig config;
    const char* key;
  };
  const Case cases[] = {{{.static_scale = -1}, "fp16.loss_scale"},
                        {{.scale_window = 0}, "fp16.loss_scale_window"},
                        {{.hysteresis = 0}, "fp16.hysteresis"},
                        {{.min_scale = 0}, "fp16.min_loss_scale"},
                        {{.initial_scale_power = -1}, "fp16.initial_scale_power"}};
  for (const Case& c : cases) {
    EXPECT_ERROR(LossScaler::create(c.config), ErrorCode::kInvalidArgument, c.key);
  }
  LossScaler dynamic = LossScaler::create(LossScalerConfig{}).value();
  LossScaler fixed = LossScaler::create(LossScalerConfig{.static_scale = 8}).value();
  EXPECT_ERROR(dynamic.load_state(fixed.state()), ErrorCode::kInvalidArgument, "dynamic");
  EXPECT_ERROR(dynamic.load_state({{"cur_scale", 2.0}}), ErrorCode::kInvalidArgument, "cur_iter");
}

}  // namespace
}  // namespace tierzero::engine
