// CpuAdam::step against the double-precision reference, on every compiled Highway target: all
// element-type combinations, lengths that are no multiple of any vector width, many steps with
// changing lr and betas, both lerp branches, resume at any step, the 16-bit param copy, and 16-bit
// params updated in place (no fp32 master).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu_adam/adam.h"
#include "hwy/aligned_allocator.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/cpu_adam/reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

using reference::ReferenceState;
using reference::TypedBuffer;

constexpr ElementType kAllTypes[] = {ElementType::kF32, ElementType::kBF16, ElementType::kF16};
constexpr size_t kLengths[] = {1, 3, 17, 100, 1037};
constexpr int kSteps = 24;
constexpr double kLossScale = 1024.0;

struct Case {
  ElementType grads, state;
  bool write16;
  ElementType params16;
  AdamMode mode;
  bool bias_correction;
  double beta1;                            // 0.9: lerp from m; 0.3: torch's other lerp branch (weight >= 0.5)
  ElementType params = ElementType::kF32;  // bf16 | fp16: params_16bit, updated in place
};

// Hyper-parameters of step `k` (1-based): a warmup-then-decay lr, and betas that change mid-run.
AdamHyperParams schedule(const Case& c, int k) {
  AdamHyperParams hp;
  hp.mode = c.mode;
  hp.bias_correction = c.bias_correction;
  hp.lr = 1e-2 * std::min(1.0, k / 5.0) * std::pow(0.97, k);
  hp.beta1 = k <= 12 ? c.beta1 : c.beta1 - 0.05;
  hp.beta2 = k <= 12 ? 0.999 : 0.99;
  hp.eps = 1e-8;
  hp.weight_decay = 0.05;
  return hp;
}

// The buffers of one run, initialised from `seed`: params in [-1, 1] (rounded to their type), zero
// moments. fp32 params live in `params`, 16-bit ones in `params_16bit`.
struct OptimizerRun {
  OptimizerRun(const Case& c, size_t n, uint32_t seed)
      : params(c.params == ElementType::kF32 ? n : 0),
        params_16bit(c.params, c.params == ElementType::kF32 ? 0 : n),
        grads(c.grads, n),
        exp_avg(c.state, n),
        exp_avg_sq(c.state, n),
        params16(c.params16, n) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      if (params.empty()) {
        params_16bit.set(i, uniform(rng));
      } else {
        params[i] = uniform(rng);
      }
      exp_avg.set(i, 0.0f);
      exp_avg_sq.set(i, 0.0f);
    }
  }
  AdamBuffers buffers(bool write16) {
    if (params.empty()) return {{}, grads.const_view(), exp_avg.view(), exp_avg_sq.view(), {}, params_16bit.view()};
    return {params, grads.const_view(), exp_avg.view(), exp_avg_sq.view(), write16 ? params16.view() : Elements{}, {}};
  }
  float param(size_t i) const { return params.empty() ? params_16bit.get(i) : params[i]; }
  std::vector<float> params;
  TypedBuffer params_16bit, grads, exp_avg, exp_avg_sq, params16;
};

// Fills the gradients of step `k`: N(0, 1) times the loss scale, with a spread of magnitudes.
void fill_grads(TypedBuffer& grads, uint32_t seed, int k) {
  std::mt19937 rng(seed * 7919u + static_cast<uint32_t>(k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < grads.size(); ++i) {
    grads.set(i, normal(rng) * static_cast<float>(kLossScale) * (i % 3 == 0 ? 0.01f : 1.0f));
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (ElementType g : kAllTypes) {
    for (ElementType s : {ElementType::kF32, ElementType::kBF16}) {
      for (int out = 0; out < 3; ++out) {
        for (AdamMode mode : {AdamMode::kAdam, AdamMode::kAdamW}) {
          const bool write16 = out != 0;
          const ElementType p16 = out == 2 ? ElementType::kF16 : ElementType::kBF16;
          cases.push_back({g, s, write16, p16, mode, true, 0.9});
          if (out == 0) cases.push_back({g, s, write16, p16, mode, false, 0.3});
        }
      }
    }
  }
  for (ElementType p : {ElementType::kBF16, ElementType::kF16}) {
    for (ElementType g : {p, ElementType::kF32}) {
      for (ElementType s : {ElementType::kF32, ElementType::kBF16}) {
        cases.push_back({g, s, false, ElementType::kBF16, AdamMode::kAdamW, true, 0.9, p});
        cases.push_back({g, s, false, ElementType::kBF16, AdamMode::kAdam, false, 0.3, p});
      }
    }
  }
  return cases;
}

std::string describe(const Case& c, size_t n) {
  return std::string("params ") + element_type_name(c.params) + ", grads " + element_type_name(c.grads) + ", state " +
         element_type_name(c.state) + ", params16 " + (c.write16 ? element_type_name(c.params16) : "none") +
         (c.mode == AdamMode::kAdam ? ", Adam" : ", AdamW") + (c.bias_correction ? "" : ", no bias correction") +
         ", beta1 " + std::to_string(c.beta1) + ", n " + std::to_string(n);
}

// Half the spacing of `type` values around x (0 for fp32: the float bounds cover its rounding).
double half_ulp(ElementType type, double x) {
  if (type == ElementType::kF32) return 0.0;
  const int mantissa_bits = type == ElementType::kBF16 ? 7 : 10;
  const int min_exponent = type == ElementType::kBF16 ? -126 : -14;
  return std::ldexp(0.5, std::max(std::ilogb(x), min_exponent) - mantissa_bits);
}

class CpuAdamStepTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(CpuAdamStepTest);

TEST_P(CpuAdamStepTest, DispatchesToTheTargetUnderTest) { EXPECT_EQ(simd_target_name(), hwy::TargetName(GetParam())); }

ReferenceState state_of(const OptimizerRun& run) {
  ReferenceState s;
  for (size_t i = 0; i < run.exp_avg.size(); ++i) {
    s.params.push_back(run.param(i));
    s.exp_avg.push_back(run.exp_avg.get(i));
    s.exp_avg_sq.push_back(run.exp_avg_sq.get(i));
  }
  return s;
}

// lr / bc1 * m_error / (sqrt(v) / sqrt(bc2) + eps) with v from the reference: what an error of
// m_error in m (and relatively as much in v) does to the update p - p_before.
double update_error(const AdamHyperParams& hp, int64_t k, const ReferenceState& ref, size_t i, double m_error) {
  const double bc1 = hp.bias_correction ? 1.0 - std::pow(hp.beta1, k) : 1.0;
  const double bc2 = hp.bias_correction ? 1.0 - std::pow(hp.beta2, k) : 1.0;
  return hp.lr / bc1 * m_error / (std::sqrt(ref.exp_avg_sq[i] / bc2) + hp.eps);
}

// Every case, every length, kSteps steps, each step checked against the double reference applied
// to the same inputs (the kernel's state before the step): params within a few float roundings of
// |p| and of the update; m and v within a few float roundings of their terms, plus one bf16 ulp
// (2^-7 relative) when stored as bf16, since float and double may round a tie-near value apart.
// params16 is exactly the round-to-nearest-even copy of the new params. 16-bit params are within
// half a 16-bit ulp (plus the float bound) of the exact update: correctly rounded.
TEST_P(CpuAdamStepTest, EveryStepMatchesDoubleReference) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  uint32_t seed = 1;
  for (const Case& c : all_cases()) {
    const double moment_ulp = c.state == ElementType::kF32 ? 0.0 : 1.0 / 128;
    const double update_rel = c.state == ElementType::kF32 ? 1e-6 : 1.0 / 256;
    for (size_t n : kLengths) {
      SCOPED_TRACE(describe(c, n));
      OptimizerRun run(c, n, ++seed);
      for (int k = 1; k <= kSteps; ++k) {
        SCOPED_TRACE("step " + std::to_string(k));
        const AdamHyperParams hp = schedule(c, k);
        fill_grads(run.grads, seed, k);
        const float multiplier = static_cast<float>(1.0 / kLossScale);
        std::vector<double> g(n);
        for (size_t i = 0; i < n; ++i) g[i] = run.grads.get(i);
        const ReferenceState before = state_of(run);
        ReferenceState ref = before;
        reference::reference_step(ref, g, hp, k, multiplier, c.state);
        ASSERT_OK(adam.step(hp, k, multiplier, run.buffers(c.write16)));
        for (size_t i = 0; i < n; ++i) {
          const double g_term = std::fabs(g[i] * multiplier) + hp.weight_decay * std::fabs(before.params[i]);
          const double m_scale = std::fabs(before.exp_avg[i]) + g_term;
          const double v_scale = before.exp_avg_sq[i] + g_term * g_term;
          const double m_error = 1e-6 * m_scale + moment_ulp * std::fabs(ref.exp_avg[i]);
          ASSERT_NEAR(run.exp_avg.get(i), ref.exp_avg[i], m_error) << "element " << i;
          ASSERT_NEAR(run.exp_avg_sq.get(i), ref.exp_avg_sq[i], 1e-6 * v_scale + moment_ulp * ref.exp_avg_sq[i])
              << "element " << i;
          ASSERT_NEAR(run.param(i), ref.params[i],
                      half_ulp(c.params, ref.params[i]) + 2.5e-7 * std::fabs(before.params[i]) +
                          update_error(hp, k, ref, i, 2 * m_error + update_rel * std::fabs(ref.exp_avg[i])) + 1e-12)
              << "element " << i;
          if (c.write16) {
            ASSERT_EQ(run.params16.get(i), reference::round_to(c.params16, run.params[i])) << "element " << i;
          }
        }
      }
    }
  }
}

// With fp32 state, kSteps steps run free of the reference stay within the sum of the per-step
// bounds: float arithmetic does not drift.
TEST_P(CpuAdamStepTest, Fp32StateDoesNotDriftFromDoubleReference) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  for (const Case& c : all_cases()) {
    if (c.state != ElementType::kF32 || c.params != ElementType::kF32) continue;
    const size_t n = 1037;
    SCOPED_TRACE(describe(c, n));
    OptimizerRun run(c, n, 77);
    ReferenceState ref = state_of(run);
    std::vector<double> bound(n, 0.0);
    for (int k = 1; k <= kSteps; ++k) {
      const AdamHyperParams hp = schedule(c, k);
      fill_grads(run.grads, 77, k);
      std::vector<double> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = run.grads.get(i);
      const std::vector<double> params_before = ref.params;
      reference::reference_step(ref, g, hp, k, 1.0 / kLossScale, c.state);
      ASSERT_OK(adam.step(hp, k, static_cast<float>(1.0 / kLossScale), run.buffers(c.write16)));
      for (size_t i = 0; i < n; ++i) {
        const double g_term = std::fabs(g[i] / kLossScale) + hp.weight_decay * std::fabs(params_before[i]);
        const double m_error = 1e-6 * (std::fabs(ref.exp_avg[i]) + g_term) + 1e-5 * std::fabs(ref.exp_avg[i]);
        bound[i] += 2.5e-7 * std::fabs(params_before[i]) + update_error(hp, k, ref, i, m_error);
      }
    }
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(run.params[i], ref.params[i], bound[i]) << "element " << i;
  }
}

// 16-bit params over kSteps steps run free of the reference, which rounds p to the same type after
// every step: each element stays within one 16-bit ulp of it (a float and a double result may
// round apart, and the difference, once made, carries on), and almost all are equal.
TEST_P(CpuAdamStepTest, SixteenBitParamsTrackTheRoundedReference) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  for (ElementType type : {ElementType::kBF16, ElementType::kF16}) {
    const Case c{type, ElementType::kF32, false, ElementType::kBF16, AdamMode::kAdamW, true, 0.9, type};
    const size_t n = 1037;
    SCOPED_TRACE(describe(c, n));
    OptimizerRun run(c, n, 55);
    ReferenceState ref = state_of(run);
    for (int k = 1; k <= kSteps; ++k) {
      fill_grads(run.grads, 55, k);
      std::vector<double> g(n);
      for (size_t i = 0; i < n; ++i) g[i] = run.grads.get(i);
      reference::reference_step(ref, g, schedule(c, k), k, 1.0 / kLossScale, c.state, type);
      ASSERT_OK(adam.step(schedule(c, k), k, static_cast<float>(1.0 / kLossScale), run.buffers(false)));
    }
    size_t equal = 0;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(run.param(i), ref.params[i], 2 * half_ulp(type, ref.params[i])) << "element " << i;
      equal += run.param(i) == ref.params[i];
    }
    EXPECT_GE(equal, n * 99 / 100);
  }
}

// A copy of `bytes` at `src` in 64-byte aligned memory, starting `shift` bytes past the alignment.
struct AlignedCopy {
  AlignedCopy(const void* src, size_t bytes, size_t shift)
      : memory(hwy::AllocateAligned<uint8_t>(bytes + shift)), data(memory.get() + shift), size(bytes) {
    std::memcpy(data, src, bytes);
  }
  std::vector<uint8_t> contents() const { return {data, data + size}; }
  hwy::AlignedFreeUniquePtr<uint8_t[]> memory;
  uint8_t* data;
  size_t size;
};

// Buffers of one run in aligned memory: params (fp32 or 16-bit), m, v and the 16-bit copy.
struct AlignedRun {
  AlignedRun(const Case& c, OptimizerRun& run, size_t shift_elements)
      : c(c),
        n(run.exp_avg.size()),
        params(run.params.empty() ? static_cast<const void*>(run.params_16bit.bytes().data()) : run.params.data(),
               n * element_size(c.params), shift_elements * element_size(c.params)),
        exp_avg(run.exp_avg.bytes().data(), run.exp_avg.bytes().size(), shift_elements * element_size(c.state)),
        exp_avg_sq(run.exp_avg_sq.bytes().data(), run.exp_avg_sq.bytes().size(),
                   shift_elements * element_size(c.state)),
        params16(run.params16.bytes().data(), run.params16.bytes().size(), shift_elements * 2) {}
  AdamBuffers buffers(const TypedBuffer& grads) const {
    const bool fp32 = c.params == ElementType::kF32;
    return {fp32 ? std::span<float>(reinterpret_cast<float*>(params.data), n) : std::span<float>(),
            grads.const_view(),
            {exp_avg.data, n, c.state},
            {exp_avg_sq.data, n, c.state},
            c.write16 ? Elements{params16.data, n, c.params16} : Elements{},
            fp32 ? Elements{} : Elements{params.data, n, c.params}};
  }
  Case c;
  size_t n;
  AlignedCopy params, exp_avg, exp_avg_sq, params16;
};

// Streaming (non-temporal) stores change how the bytes are written, not what they are: the same
// steps with and without them give the same params, moments and 16-bit copy, for buffers that are
// 64-byte aligned (streamed) and one element off (ordinary stores, the fallback).
TEST_P(CpuAdamStepTest, StreamingStoresWriteTheSameBytes) {
  const CpuAdam plain({.threads = 2, .tile_elements = 64});
  const CpuAdam streaming({.threads = 2, .tile_elements = 64, .streaming_stores = true});
  const size_t n = 1037;
  for (const Case& c :
       {Case{ElementType::kF32, ElementType::kF32, false, ElementType::kBF16, AdamMode::kAdamW, true, 0.9},
        Case{ElementType::kBF16, ElementType::kF32, true, ElementType::kBF16, AdamMode::kAdamW, true, 0.9},
        Case{ElementType::kBF16, ElementType::kBF16, true, ElementType::kF16, AdamMode::kAdam, true, 0.3},
        Case{ElementType::kBF16, ElementType::kF32, false, ElementType::kBF16, AdamMode::kAdamW, true, 0.9,
             ElementType::kBF16}}) {
    for (size_t shift : {0, 1}) {
      SCOPED_TRACE(describe(c, n) + ", shift " + std::to_string(shift));
      OptimizerRun run(c, n, 31);
      const AlignedRun ours(c, run, shift), reference(c, run, shift);
      for (int k = 1; k <= 5; ++k) {
        fill_grads(run.grads, 31, k);
        ASSERT_OK(streaming.step(schedule(c, k), k, 1.0f / kLossScale, ours.buffers(run.grads)));
        ASSERT_OK(plain.step(schedule(c, k), k, 1.0f / kLossScale, reference.buffers(run.grads)));
      }
      EXPECT_EQ(ours.params.contents(), reference.params.contents());
      EXPECT_EQ(ours.exp_avg.contents(), reference.exp_avg.contents());
      EXPECT_EQ(ours.exp_avg_sq.contents(), reference.exp_avg_sq.contents());
      EXPECT_EQ(ours.params16.contents(), reference.params16.contents());
    }
  }
}

// Stopping after step k, copying the state into fresh buffers and continuing with steps k+1...
// on another CpuAdam (other thread count and tiling) gives the uninterrupted run's bytes.
TEST_P(CpuAdamStepTest, ResumeAtAnyStepEqualsUninterruptedRun) {
  const CpuAdam first({.threads = 2, .tile_elements = 64});
  const CpuAdam second({.threads = 1, .tile_elements = 1000});
  const size_t n = 1037;
  for (const Case& c :
       {Case{ElementType::kBF16, ElementType::kF32, true, ElementType::kBF16, AdamMode::kAdamW, true, 0.9},
        Case{ElementType::kF16, ElementType::kBF16, true, ElementType::kF16, AdamMode::kAdam, true, 0.9},
        Case{ElementType::kF32, ElementType::kF32, false, ElementType::kBF16, AdamMode::kAdamW, false, 0.3},
        Case{ElementType::kBF16, ElementType::kF32, false, ElementType::kBF16, AdamMode::kAdamW, true, 0.9,
             ElementType::kBF16}}) {
    SCOPED_TRACE(describe(c, n));
    OptimizerRun whole(c, n, 99);
    for (int k = 1; k <= kSteps; ++k) {
      fill_grads(whole.grads, 99, k);
      ASSERT_OK(first.step(schedule(c, k), k, 1.0f / kLossScale, whole.buffers(c.write16)));
    }
    for (int stop : {1, 7, 13, kSteps - 1}) {
      OptimizerRun before(c, n, 99);
      for (int k = 1; k <= stop; ++k) {
        fill_grads(before.grads, 99, k);
        ASSERT_OK(first.step(schedule(c, k), k, 1.0f / kLossScale, before.buffers(c.write16)));
      }
      OptimizerRun resumed = before;  // a checkpoint: params and moments, copied
      for (int k = stop + 1; k <= kSteps; ++k) {
        fill_grads(resumed.grads, 99, k);
        ASSERT_OK(second.step(schedule(c, k), k, 1.0f / kLossScale, resumed.buffers(c.write16)));
      }
      ASSERT_EQ(resumed.params, whole.params) << "stop " << stop;
      ASSERT_EQ(resumed.params_16bit.bytes(), whole.params_16bit.bytes()) << "stop " << stop;
      ASSERT_EQ(resumed.exp_avg.bytes(), whole.exp_avg.bytes()) << "stop " << stop;
      ASSERT_EQ(resumed.exp_avg_sq.bytes(), whole.exp_avg_sq.bytes()) << "stop " << stop;
      if (c.write16) {
        ASSERT_EQ(resumed.params16.bytes(), whole.params16.bytes()) << "stop " << stop;
      }
    }
  }
}

// memory_pass (the benchmarks' roofline) touches exactly what step() touches: every case's p, m and
// v become their value plus the gradient, rounded once to their type, and the 16-bit copy is the
// new fp32 param rounded to nearest even; a buffer step() refuses is refused untouched.
TEST_P(CpuAdamStepTest, MemoryPassAddsTheGradientToEveryWrittenBuffer) {
  const CpuAdam adam({.threads = 2, .tile_elements = 64});
  uint32_t seed = 40;
  for (const Case& c : all_cases()) {
    for (size_t n : kLengths) {
      SCOPED_TRACE(describe(c, n));
      OptimizerRun run(c, n, ++seed);
      fill_grads(run.grads, seed, 1);
      for (size_t i = 0; i < n; ++i) {  // m and v nonzero, so a missed add shows
        run.exp_avg.set(i, 0.5f + static_cast<float>(i));
        run.exp_avg_sq.set(i, 2.0f * static_cast<float>(i));
      }
      const ReferenceState before = state_of(run);
      ASSERT_OK(adam.memory_pass(run.buffers(c.write16)));
      for (size_t i = 0; i < n; ++i) {
        const float g = run.grads.get(i);
        const float p = reference::round_to(c.params, static_cast<float>(before.params[i]) + g);
        ASSERT_EQ(run.param(i), p) << i;
        ASSERT_EQ(run.exp_avg.get(i), reference::round_to(c.state, static_cast<float>(before.exp_avg[i]) + g)) << i;
        ASSERT_EQ(run.exp_avg_sq.get(i), reference::round_to(c.state, static_cast<float>(before.exp_avg_sq[i]) + g))
            << i;
        if (c.write16 && c.params == ElementType::kF32) {
          ASSERT_EQ(run.params16.get(i), reference::round_to(c.params16, p)) << i;
        }
      }
    }
  }
  OptimizerRun run(all_cases()[0], 10, 1);
  const std::vector<float> params_before = run.params;
  AdamBuffers short_grads = run.buffers(true);
  short_grads.grads.count = 9;
  EXPECT_EQ(adam.memory_pass(short_grads).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(run.params, params_before);
}

// Bad buffers and hyper-parameters are refused before anything is written.
TEST(CpuAdamStep, RejectsInvalidArgumentsWithoutWriting) {
  const CpuAdam adam({.threads = 1});
  const Case c{ElementType::kF32, ElementType::kF32, true, ElementType::kBF16, AdamMode::kAdamW, true, 0.9};
  OptimizerRun run(c, 10, 5);
  fill_grads(run.grads, 5, 1);
  const std::vector<float> params_before = run.params;
  AdamHyperParams hp;

  AdamBuffers short_grads = run.buffers(true);
  short_grads.grads.count = 9;
  EXPECT_EQ(adam.step(hp, 1, 1.0f, short_grads).code(), ErrorCode::kInvalidArgument);

  TypedBuffer bf16_m(ElementType::kBF16, 10);
  AdamBuffers mixed_state = run.buffers(true);
  mixed_state.exp_avg = bf16_m.view();
  EXPECT_EQ(adam.step(hp, 1, 1.0f, mixed_state).code(), ErrorCode::kInvalidArgument);

  TypedBuffer f16_m(ElementType::kF16, 10), f16_v(ElementType::kF16, 10);
  AdamBuffers f16_state = run.buffers(true);
  f16_state.exp_avg = f16_m.view();
  f16_state.exp_avg_sq = f16_v.view();
  EXPECT_EQ(adam.step(hp, 1, 1.0f, f16_state).code(), ErrorCode::kInvalidArgument);

  std::vector<float> fp32_copy(10);
  AdamBuffers fp32_params16 = run.buffers(true);
  fp32_params16.params16 = elements(std::span<float>(fp32_copy));
  EXPECT_EQ(adam.step(hp, 1, 1.0f, fp32_params16).code(), ErrorCode::kInvalidArgument);

  TypedBuffer bf16_params(ElementType::kBF16, 10);
  AdamBuffers both_params = run.buffers(false);
  both_params.params_16bit = bf16_params.view();
  EXPECT_EQ(adam.step(hp, 1, 1.0f, both_params).code(), ErrorCode::kInvalidArgument);
  AdamBuffers bf16_params_with_copy = run.buffers(true);
  bf16_params_with_copy.params = {};
  bf16_params_with_copy.params_16bit = bf16_params.view();
  EXPECT_EQ(adam.step(hp, 1, 1.0f, bf16_params_with_copy).code(), ErrorCode::kInvalidArgument);
  AdamBuffers fp32_params_16bit = run.buffers(false);
  fp32_params_16bit.params = {};
  fp32_params_16bit.params_16bit = elements(std::span<float>(fp32_copy));
  EXPECT_EQ(adam.step(hp, 1, 1.0f, fp32_params_16bit).code(), ErrorCode::kInvalidArgument);

  EXPECT_EQ(adam.step(hp, 0, 1.0f, run.buffers(true)).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(adam.step(hp, 1, NAN, run.buffers(true)).code(), ErrorCode::kInvalidArgument);
  AdamHyperParams bad_beta = hp;
  bad_beta.beta2 = 1.0;
  EXPECT_EQ(adam.step(bad_beta, 1, 1.0f, run.buffers(true)).code(), ErrorCode::kInvalidArgument);
  AdamHyperParams bad_lr = hp;
  bad_lr.lr = -1.0;
  EXPECT_EQ(adam.step(bad_lr, 1, 1.0f, run.buffers(true)).code(), ErrorCode::kInvalidArgument);

  EXPECT_EQ(run.params, params_before);
}

}  // namespace
}  // namespace tierzero::cpu_adam
