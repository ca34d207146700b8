// step_portable (the host compile of the arithmetic the GPU kernel shares) against CpuAdam::step on
// every compiled Highway target: byte for byte with the target's own MulAdd rounding, over random and
// edge inputs, 8-bit, bf16 and fp32 moments, and several steps; and the other rounding differs, so the
// comparison can fail.
#include <string>

#include "cpu_adam/adam.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/cpu_adam/compact_cases.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

using cases::CompactCase;
using cases::CompactValues;
using cases::first_difference;

class PortableStepTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(PortableStepTest);

// Runs every step of `c` through CpuAdam::step and step_portable(`rounding`); returns the first
// difference of the states after any step ("" when every step gave the same bytes).
std::string first_step_difference(const CompactCase& c, MulAddRounding rounding) {
  const CpuAdam adam({.threads = 2, .tile_elements = kMomentBlock});
  CompactValues simd = c.initial, portable = c.initial;
  for (const cases::CompactStep& s : c.steps) {
    EXPECT_OK(adam.step(s.hp, s.number, s.grad_multiplier, simd.buffers(s.grads.const_view())));
    EXPECT_OK(step_portable(s.hp, s.number, s.grad_multiplier, portable.buffers(s.grads.const_view()), rounding));
    const std::string difference = first_difference(simd, portable);
    if (!difference.empty()) return "step " + std::to_string(s.number) + ": " + difference;
  }
  return "";
}

TEST_P(PortableStepTest, EqualsCpuAdamByteForByteWithTheTargetsMulAdd) {
  const MulAddRounding rounding = simd_target_mul_add();
  SCOPED_TRACE(simd_target_name() + (rounding == MulAddRounding::kFused ? " (fused)" : " (separate)"));
  for (const CompactCase& c : cases::compact_cases()) {
    EXPECT_EQ(first_step_difference(c, rounding), "") << c.name;
  }
}

// The MulAdd rounding is what makes the bytes target-dependent: with the other one the random case
// differs, so a GPU (fused) equals CpuAdam::step only on FMA targets.
TEST_P(PortableStepTest, TheOtherMulAddRoundingDiffers) {
  const MulAddRounding other =
      simd_target_mul_add() == MulAddRounding::kFused ? MulAddRounding::kSeparate : MulAddRounding::kFused;
  const std::vector<CompactCase> cases = cases::compact_cases();
  EXPECT_NE(first_step_difference(cases.front(), other), "") << cases.front().name;
}

TEST(PortableStep, AStepMovesTheMasterAndAZeroLrStepKeepsIt) {
  // Independent of CpuAdam: a step moves the master and re-encodes the moments; a zero-lr AdamW step
  // with zero gradients keeps the master bit for bit.
  const CompactCase c = cases::compact_cases().front();
  CompactValues state = c.initial;
  const cases::CompactStep& s = c.steps.front();
  ASSERT_OK(step_portable(s.hp, s.number, s.grad_multiplier, state.buffers(s.grads.const_view())));
  EXPECT_NE(state.hi, c.initial.hi);
  EXPECT_NE(state.m, c.initial.m);
  CompactValues still = c.initial;
  reference::TypedBuffer zeros(ElementType::kF32, still.size());
  AdamHyperParams hp;
  hp.lr = 0.0;
  ASSERT_OK(step_portable(hp, 1, 1.0f, still.buffers(zeros.const_view())));
  EXPECT_EQ(still.hi, c.initial.hi);
  EXPECT_EQ(still.residual, c.initial.residual);
}

TEST(PortableStep, RefusesOtherLayoutsAndWhatCpuAdamRefuses) {
  CompactValues state = cases::compact_cases().front().initial;
  const size_t n = state.size();
  reference::TypedBuffer grads(ElementType::kF32, n);
  AdamBuffers b = state.buffers(grads.const_view());
  EXPECT_ERROR(step_portable(AdamHyperParams{}, 0, 1.0f, b), ErrorCode::kInvalidArgument, "step");

  std::vector<uint16_t> m(n), v(n);
  AdamBuffers fp16_moments = b;
  fp16_moments.exp_avg = elements(std::span<uint16_t>(m), ElementType::kF16);
  fp16_moments.exp_avg_sq = elements(std::span<uint16_t>(v), ElementType::kF16);
  fp16_moments.exp_avg_scales = {};
  fp16_moments.exp_avg_sq_scales = {};
  EXPECT_ERROR(step_portable(AdamHyperParams{}, 1, 1.0f, fp16_moments), ErrorCode::kInvalidArgument, "exp_avg");

  std::vector<float> master(n);
  AdamBuffers fp32_master = b;
  fp32_master.params = master;
  fp32_master.params_16bit = {};
  fp32_master.master_residual = {};
  EXPECT_ERROR(step_portable(AdamHyperParams{}, 1, 1.0f, fp32_master), ErrorCode::kInvalidArgument, "compact master");
  EXPECT_EQ(state, cases::compact_cases().front().initial);  // nothing written
}

}  // namespace
}  // namespace tierzero::cpu_adam
