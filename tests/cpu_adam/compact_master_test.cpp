// The exact compact master (AdamBuffers::master_residual, split_master, join_master), the
// kNearestAway params16 rounding, and gradients accumulated into bf16, on every compiled Highway
// target, against independent scalar references (value comparisons in double, not the kernels' bit
// tricks).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_adam/adam.h"
#include "hwy/tests/hwy_gtest.h"
#include "tests/cpu_adam/accumulate_check.h"
#include "tests/cpu_adam/reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam {
namespace {

using reference::TypedBuffer;

class CompactMasterTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(CompactMasterTest);

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
uint32_t to_bits(float f) { return std::bit_cast<uint32_t>(f); }

// The value of a non-negative bf16 magnitude (bits << 16) in double; the pattern of inf (0x7f80)
// stands for 2^128, the next value after the largest bf16 were the exponent unbounded.
double bf16_magnitude_value(uint32_t hi_mag) {
  if (hi_mag == 0x7f80) return std::ldexp(1.0, 128);
  return static_cast<double>(from_bits(hi_mag << 16));
}

// Independent reference of the hi half: the bf16 nearest in value to x, ties away from zero,
// found by comparing x with the midpoint of the two bf16 neighbours of |x| in double (exact).
// NaN: a quiet NaN with x's sign. Values at or past the midpoint between the largest bf16 and 2^128
// give inf.
uint16_t reference_hi(float x) {
  const uint32_t bits = to_bits(x);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t mag = bits & 0x7fffffff;
  if (std::isnan(x)) return static_cast<uint16_t>(sign | (mag >> 16) | 0x40);
  if (std::isinf(x)) return static_cast<uint16_t>(sign | 0x7f80);
  const double ax = std::fabs(static_cast<double>(x));
  const uint32_t below = mag >> 16;  // the bf16 at or below |x|
  const double low = bf16_magnitude_value(below), high = bf16_magnitude_value(below + 1);
  const double midpoint = low + (high - low) / 2;
  return static_cast<uint16_t>(sign | (ax >= midpoint ? below + 1 : below));
}

// Splits, checks hi against the reference, the residual's range, and that join gives x back bit
// for bit (a quiet NaN for NaN).
void check_round_trip(const std::vector<float>& values) {
  const size_t n = values.size();
  std::vector<uint16_t> hi(n);
  std::vector<int16_t> residual(n);
  std::vector<float> back(n);
  ASSERT_OK(split_master(values, hi, residual));
  ASSERT_OK(join_master(hi, residual, back));
  for (size_t i = 0; i < n; ++i) {
    const uint32_t bits = to_bits(values[i]);
    ASSERT_EQ(hi[i], reference_hi(values[i])) << std::hex << "bits 0x" << bits;
    const int64_t want_residual =
        std::isnan(values[i]) ? 0 : static_cast<int64_t>(bits & 0x7fffffff) - (int64_t{hi[i] & 0x7fff} << 16);
    ASSERT_EQ(residual[i], want_residual) << std::hex << "bits 0x" << bits;
    if (std::isnan(values[i])) {
      ASSERT_TRUE(std::isnan(back[i])) << std::hex << "bits 0x" << bits;
      ASSERT_TRUE(to_bits(back[i]) & 0x00400000) << "a rebuilt NaN is quiet";
      ASSERT_EQ(std::signbit(back[i]), std::signbit(values[i]));
    } else {
      ASSERT_EQ(to_bits(back[i]), bits) << std::hex << "bits 0x" << bits;
    }
  }
}

// Every class of fp32 bit pattern: zeros, subnormals, binade boundaries of every exponent, exact
// ties with odd and even hi, the bf16 overflow threshold, FLT_MAX, inf and NaNs of both signs.
TEST_P(CompactMasterTest, SplitJoinRoundTripsEveryBitPatternClass) {
  std::vector<float> values;
  const auto add = [&](uint32_t bits) {
    values.push_back(from_bits(bits));
    values.push_back(from_bits(bits ^ 0x80000000u));
  };
  for (uint32_t b :
       {0x00000000u, 0x00000001u, 0x00007fffu, 0x00008000u, 0x00008001u, 0x0000ffffu, 0x00010000u, 0x007fffffu,
        0x00800000u, 0x3f7fffffu, 0x3f800000u, 0x3f800001u, 0x3f807fffu, 0x3f808000u, 0x3f818000u, 0x3f817fffu,
        0x3fffffffu, 0x7f7f0000u, 0x7f7f7fffu, 0x7f7f8000u, 0x7f7f8001u, 0x7f7fffffu, 0x7f800000u, 0x7f800001u,
        0x7f807fffu, 0x7f808000u, 0x7fbfffffu, 0x7fc00000u, 0x7fc00001u, 0x7fffffffu}) {
    add(b);
  }
  // Every hi pattern (every exponent, every bf16 mantissa) with low halves at the tie, around it,
  // and at the ends.
  for (uint32_t hi = 0; hi <= 0x7fff; ++hi) {
    for (uint32_t low : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) add((hi << 16) | low);
  }
  values.push_back(std::numeric_limits<float>::max());
  values.push_back(std::numeric_limits<float>::denorm_min());
  values.push_back(std::numeric_limits<float>::min());
  values.push_back(std::numeric_limits<float>::quiet_NaN());
  values.push_back(std::numeric_limits<float>::signaling_NaN());
  values.push_back(-std::numeric_limits<float>::signaling_NaN());
  check_round_trip(values);
}

// Random bit patterns (every class in proportion: about 0.4 % NaN, 0.4 % subnormal), 2^23 per target.
TEST_P(CompactMasterTest, SplitJoinRoundTripsRandomBitPatterns) {
  std::mt19937 rng(7 + static_cast<uint32_t>(GetParam() & 0xffff));
  std::vector<float> values(1 << 20);
  for (int round = 0; round < 8; ++round) {
    for (float& v : values) v = from_bits(static_cast<uint32_t>(rng()));
    // Some odd sizes: the vector loop and the scalar tail.
    check_round_trip(std::vector<float>(values.begin(), values.begin() + 1037));
    check_round_trip(values);
  }
}

TEST(CompactMasterRefusals, RefusesSizeMismatches) {
  std::vector<float> master(10);
  std::vector<uint16_t> hi(10), hi9(9);
  std::vector<int16_t> residual(10);
  EXPECT_ERROR(split_master(master, hi9, residual), ErrorCode::kInvalidArgument, "hi 9");
  EXPECT_ERROR(join_master(hi9, residual, master), ErrorCode::kInvalidArgument, "hi 9");
  EXPECT_OK(split_master(master, hi, residual));
}

// One fp32-master run and one compact run of the same problem.
struct PairedRun {
  PairedRun(size_t n, ElementType grad_type, ElementType state_type, uint32_t seed)
      : master(n),
        params16(ElementType::kBF16, n),
        hi(n),
        residual(n),
        grads(grad_type, n),
        state_type(state_type),
        m32(state_is_8bit() ? ElementType::kF32 : state_type, n),
        v32(state_is_8bit() ? ElementType::kF32 : state_type, n),
        mc(state_is_8bit() ? ElementType::kF32 : state_type, n),
        vc(state_is_8bit() ? ElementType::kF32 : state_type, n),
        m8(2 * n),
        v8(2 * n),
        scales(4 * moment_block_count(n)) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float& p : master) p = uniform(rng);
    // Some values that round to bf16 inf, and a subnormal, to carry through the step.
    if (n > 10) {
      master[3] = from_bits(0x7f7fa000);
      master[5] = from_bits(0x00000345);
    }
    EXPECT_OK(split_master(master, hi, residual));
    for (size_t i = 0; i < n; ++i) {
      m32.set(i, 0.0f), v32.set(i, 0.0f), mc.set(i, 0.0f), vc.set(i, 0.0f);
    }
  }
  bool state_is_8bit() const { return state_type == ElementType::kI8; }
  size_t blocks() const { return moment_block_count(master.size()); }
  AdamBuffers fp32_buffers() {
    AdamBuffers b{master, grads.const_view(), {}, {}, params16.view(), {}};
    b.params16_rounding = Bf16Rounding::kNearestAway;
    set_state(b, 0);
    return b;
  }
  AdamBuffers compact_buffers() {
    AdamBuffers b{{}, grads.const_view(), {}, {}, {}, elements(std::span<uint16_t>(hi), ElementType::kBF16)};
    b.master_residual = residual;
    set_state(b, 1);
    return b;
  }
  void set_state(AdamBuffers& b, int which) {
    const size_t n = master.size();
    if (state_is_8bit()) {
      b.exp_avg = {m8.data() + which * n, n, ElementType::kI8};
      b.exp_avg_sq = {v8.data() + which * n, n, ElementType::kU8};
      b.exp_avg_scales = std::span<float>(scales).subspan((2 * which) * blocks(), blocks());
      b.exp_avg_sq_scales = std::span<float>(scales).subspan((2 * which + 1) * blocks(), blocks());
    } else {
      b.exp_avg = which == 0 ? m32.view() : mc.view();
      b.exp_avg_sq = which == 0 ? v32.view() : vc.view();
    }
  }
  std::vector<float> master;
  TypedBuffer params16;
  std::vector<uint16_t> hi;
  std::vector<int16_t> residual;
  TypedBuffer grads;
  ElementType state_type;
  TypedBuffer m32, v32, mc, vc;
  std::vector<uint8_t> m8, v8;
  std::vector<float> scales;
};

// The compact master follows the fp32 master bit for bit over 20 steps (rebuilt master == fp32
// master, hi == params16 rounded with kNearestAway, the moments equal), for fp32, bf16 and 8-bit
// moments, Adam and AdamW with weight decay, fp32, bf16 and fp16 gradients, with different
// tilings and thread counts for the two runs.
TEST_P(CompactMasterTest, CompactStepEqualsFp32MasterStepBitForBit) {
  const CpuAdam two({.threads = 2, .tile_elements = 64});
  const CpuAdam one({.threads = 1});
  uint32_t seed = 11;
  for (ElementType state : {ElementType::kF32, ElementType::kBF16, ElementType::kI8}) {
    for (ElementType grad : {ElementType::kF32, ElementType::kBF16, ElementType::kF16}) {
      for (AdamMode mode : {AdamMode::kAdam, AdamMode::kAdamW}) {
        for (size_t n : {size_t{1}, size_t{37}, size_t{1037}}) {
          SCOPED_TRACE(std::string("state ") + element_type_name(state) + ", grads " + element_type_name(grad) +
                       (mode == AdamMode::kAdam ? ", Adam" : ", AdamW") + ", n " + std::to_string(n));
          PairedRun run(n, grad, state, ++seed);
          std::mt19937 rng(seed);
          std::normal_distribution<float> normal(0.0f, 1.0f);
          for (int k = 1; k <= 20; ++k) {
            AdamHyperParams hp;
            hp.mode = mode;
            hp.lr = 1e-2 * std::pow(0.95, k);
            hp.weight_decay = 0.1;
            for (size_t i = 0; i < n; ++i) run.grads.set(i, normal(rng) * (i % 5 == 0 ? 1e-3f : 1.0f));
            ASSERT_OK(two.step(hp, k, 0.5f, run.fp32_buffers()));
            ASSERT_OK(one.step(hp, k, 0.5f, run.compact_buffers()));
            std::vector<float> rebuilt(n);
            ASSERT_OK(join_master(run.hi, run.residual, rebuilt));
            for (size_t i = 0; i < n; ++i) {
              ASSERT_EQ(to_bits(rebuilt[i]), to_bits(run.master[i])) << "step " << k << " element " << i;
              ASSERT_EQ(run.hi[i], reinterpret_cast<const uint16_t*>(run.params16.bytes().data())[i])
                  << "step " << k << " element " << i;
              ASSERT_EQ(run.hi[i], reference_hi(run.master[i])) << "step " << k << " element " << i;
            }
            if (run.state_is_8bit()) {
              ASSERT_EQ(std::memcmp(run.m8.data(), run.m8.data() + n, n), 0) << "step " << k;
              ASSERT_EQ(std::memcmp(run.v8.data(), run.v8.data() + n, n), 0) << "step " << k;
              const size_t b = run.blocks();
              ASSERT_EQ(std::memcmp(run.scales.data(), run.scales.data() + 2 * b, 2 * b * sizeof(float)), 0);
            } else {
              ASSERT_EQ(run.m32.bytes(), run.mc.bytes()) << "step " << k;
              ASSERT_EQ(run.v32.bytes(), run.vc.bytes()) << "step " << k;
            }
          }
        }
      }
    }
  }
}

// kNearestEven (the default) is unchanged: params16 is torch's round-to-nearest-even copy, which
// differs from the ties-away hi exactly at ties with an even bf16 below.
TEST_P(CompactMasterTest, NearestEvenParams16StaysTheDefault) {
  const CpuAdam adam({.threads = 1});
  std::vector<float> params = {from_bits(0x3f808000), from_bits(0x3f818000), 1.0f};
  std::vector<float> grads(3, 0.0f), m(3, 0.0f), v(3, 0.0f);
  TypedBuffer params16(ElementType::kBF16, 3);
  AdamHyperParams hp;
  hp.lr = 0.0;
  hp.weight_decay = 0.0;
  ASSERT_OK(adam.step(
      hp, 1, 1.0f,
      {params, const_elements(std::span<const float>(grads)), elements(m), elements(v), params16.view(), {}}));
  const auto* bits = reinterpret_cast<const uint16_t*>(params16.bytes().data());
  EXPECT_EQ(bits[0], 0x3f80);  // tie, even below: nearest even stays, ties away would give 0x3f81
  EXPECT_EQ(bits[1], 0x3f82);  // tie, odd below: both round up
  AdamBuffers away{params, const_elements(std::span<const float>(grads)), elements(m), elements(v), params16.view(),
                   {}};
  away.params16_rounding = Bf16Rounding::kNearestAway;
  ASSERT_OK(adam.step(hp, 2, 1.0f, away));
  EXPECT_EQ(bits[0], 0x3f81);
  EXPECT_EQ(bits[1], 0x3f82);
}

TEST(CompactMasterRefusals, RefusesInconsistentBuffers) {
  const CpuAdam adam({.threads = 1});
  std::vector<float> params(8), grads(8), m(8), v(8);
  std::vector<uint16_t> hi(8), f16(8);
  std::vector<int16_t> residual(8), residual7(7);
  const ConstElements g = const_elements(std::span<const float>(grads));
  AdamBuffers b{{}, g, elements(m), elements(v), {}, elements(std::span<uint16_t>(hi), ElementType::kBF16)};
  b.master_residual = residual7;
  EXPECT_ERROR(adam.step({}, 1, 1.0f, b), ErrorCode::kInvalidArgument, "master_residual has 7 elements");
  b.master_residual = residual;
  EXPECT_OK(adam.step({}, 1, 1.0f, b));
  EXPECT_OK(adam.memory_pass(b));
  b.params_16bit.type = ElementType::kF16;
  EXPECT_ERROR(adam.step({}, 1, 1.0f, b), ErrorCode::kInvalidArgument, "master_residual needs bf16");
  AdamBuffers with_fp32{params, g, elements(m), elements(v), {}, {}};
  with_fp32.master_residual = residual;
  EXPECT_ERROR(adam.step({}, 1, 1.0f, with_fp32), ErrorCode::kInvalidArgument, "master_residual is set with fp32");
  AdamBuffers away{params, g, elements(m), elements(v), elements(std::span<uint16_t>(f16), ElementType::kF16), {}};
  away.params16_rounding = Bf16Rounding::kNearestAway;
  EXPECT_ERROR(adam.step({}, 1, 1.0f, away), ErrorCode::kInvalidArgument, "kNearestAway");
}

// A compact step gives the same bits for any thread count and tiling.
TEST_P(CompactMasterTest, ThreadCountIndependent) {
  const size_t n = 70001;
  std::vector<float> master(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& p : master) p = normal(rng);
  std::vector<float> grads(n);
  for (float& g : grads) g = normal(rng);
  std::vector<uint16_t> results[2];
  std::vector<int16_t> residuals[2];
  int r = 0;
  for (const CpuAdamOptions& options :
       {CpuAdamOptions{.threads = 1}, CpuAdamOptions{.threads = 2, .tile_elements = 64}}) {
    const CpuAdam adam(options);
    std::vector<uint16_t> hi(n);
    std::vector<int16_t> residual(n);
    ASSERT_OK(split_master(master, hi, residual));
    std::vector<float> m(n, 0.0f), v(n, 0.0f);
    AdamBuffers b{{}, const_elements(std::span<const float>(grads)),        elements(m), elements(v),
                  {}, elements(std::span<uint16_t>(hi), ElementType::kBF16)};
    b.master_residual = residual;
    for (int k = 1; k <= 3; ++k) ASSERT_OK(adam.step({}, k, 1.0f, b));
    results[r] = hi;
    residuals[r++] = residual;
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(residuals[0], residuals[1]);
}

class AccumulateBf16Test : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(AccumulateBf16Test);

// dst = bf16_rne(float(dst) + float(float(src) * scale)), against the scalar reference of
// tests/common (float and double arithmetic, one rounding each), with the norm of the new dst,
// the same for 1 and 2 threads; inf in the source is reported.
TEST_P(AccumulateBf16Test, MatchesScalarReference) {
  const CpuAdam two({.threads = 2, .tile_elements = 64});
  const CpuAdam one({.threads = 1, .tile_elements = 64});
  for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF16}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{1001}, size_t{70001}}) {
      SCOPED_TRACE(std::string(element_type_name(type)) + " n " + std::to_string(n));
      std::mt19937 rng(static_cast<uint32_t>(n) + 5);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      TypedBuffer src(type, n);
      for (size_t i = 0; i < n; ++i) src.set(i, normal(rng));
      std::vector<uint16_t> dst(n);
      for (uint16_t& d : dst) d = reference::float_to_bf16_bits(normal(rng));
      const float scale = 0.37f;
      const auto want = [&](const std::vector<uint16_t>& before, size_t i) {
        return reference::float_to_bf16_bits(
            reference::accumulate_scaled(reference::bf16_bits_to_float(before[i]), src.get(i), scale));
      };
      const auto value = [](uint16_t bits) { return static_cast<double>(reference::bf16_bits_to_float(bits)); };
      double sq_norm = 0.0;
      ASSERT_NO_FATAL_FAILURE(reference::check_accumulate(two, one, dst, src, scale, 1e-12, want, value, sq_norm));
    }
  }
  TypedBuffer src(ElementType::kF32, 100);
  src.set(57, std::numeric_limits<float>::infinity());
  std::vector<uint16_t> dst(100, 0x3f80);
  const Result<GradStats> stats = two.accumulate_scaled(std::span<uint16_t>(dst), src.const_view(), 1.0f);
  ASSERT_OK(stats);
  EXPECT_FALSE(stats->finite);
  std::vector<uint16_t> dst9(9);
  EXPECT_ERROR(two.accumulate_scaled(std::span<uint16_t>(dst9), src.const_view(), 1.0f), ErrorCode::kInvalidArgument,
               "src has 100 elements but dst has 9");
}

}  // namespace
}  // namespace tierzero::cpu_adam
