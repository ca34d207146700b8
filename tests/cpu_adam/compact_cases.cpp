#include "tests/cpu_adam/compact_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "tests/support/status_matchers.h"

namespace tierzero::cpu_adam::cases {

AdamBuffers CompactValues::buffers(ConstElements grads) {
  const size_t n = size();
  const bool eight = moments == ElementType::kI8;
  AdamBuffers b{{},
                grads,
                Elements{m.data(), n, moments},
                Elements{v.data(), n, eight ? ElementType::kU8 : moments},
                {},
                elements(std::span<uint16_t>(hi), ElementType::kBF16)};
  b.master_residual = residual;
  if (eight) {
    b.exp_avg_scales = m_scales;
    b.exp_avg_sq_scales = v_scales;
  }
  return b;
}

namespace {

template <class T>
std::string difference_in(const char* what, const std::vector<T>& a, const std::vector<T>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      std::ostringstream out;
      out << what << "[" << i << "]: " << +a[i] << " vs " << +b[i];
      return out.str();
    }
  }
  return a.size() == b.size() ? "" : std::string(what) + ": sizes differ";
}

}  // namespace

std::string first_difference(const CompactValues& a, const CompactValues& b) {
  for (const std::string& d :
       {difference_in("hi", a.hi, b.hi), difference_in("residual", a.residual, b.residual),
        difference_in("m", a.m, b.m), difference_in("v", a.v, b.v), difference_in("m_scales", a.m_scales, b.m_scales),
        difference_in("v_scales", a.v_scales, b.v_scales)}) {
    if (!d.empty()) return d;
  }
  return "";
}

namespace {

// The fp32 master and the moments of a case, before encoding.
struct Values {
  std::vector<float> master, m, v;
};

// Gradient i of step k, before it is rounded to the case's gradient type.
using GradOf = std::function<float(size_t i, int k)>;

// `values` as `type` (fp32, or bf16 rounded to nearest even), as bytes.
std::vector<uint8_t> moment_bytes(const std::vector<float>& values, ElementType type) {
  reference::TypedBuffer out(type, values.size());
  for (size_t i = 0; i < values.size(); ++i) out.set(i, values[i]);
  return out.bytes();
}

CompactValues encode(const Values& values, ElementType moments) {
  const size_t n = values.master.size();
  CompactValues s{moments, std::vector<uint16_t>(n), std::vector<int16_t>(n), {}, {}, {}, {}};
  EXPECT_OK(split_master(values.master, s.hi, s.residual));
  if (moments != ElementType::kI8) {
    s.m = moment_bytes(values.m, moments);
    s.v = moment_bytes(values.v, moments);
    return s;
  }
  s.m.resize(n), s.v.resize(n), s.m_scales.resize(moment_block_count(n)), s.v_scales.resize(moment_block_count(n));
  EXPECT_OK(encode_moment_blocks(values.m, Elements{s.m.data(), n, ElementType::kI8}, s.m_scales));
  EXPECT_OK(encode_moment_blocks(values.v, Elements{s.v.data(), n, ElementType::kU8}, s.v_scales));
  return s;
}

// Step k's hyper-parameters: lr, weight decay, Adam / AdamW, both lerp branches (beta1 0.9 and 0.3),
// beta2, eps and bias correction all change from step to step (weight decay only with `decay`).
AdamHyperParams varied(int k, bool decay) {
  AdamHyperParams hp;
  hp.lr = std::array{1e-3, 3e-4, 1e-2, 5e-5, 2e-3, 1e-1}[k % 6];
  hp.weight_decay = decay && k % 3 != 0 ? 0.1 : 0.0;
  hp.mode = k % 2 == 0 ? AdamMode::kAdamW : AdamMode::kAdam;
  hp.beta1 = k % 4 == 3 ? 0.3 : 0.9;
  hp.beta2 = k % 5 == 4 ? 0.95 : 0.999;
  hp.eps = k % 3 == 2 ? 1e-6 : 1e-8;
  hp.bias_correction = k != 4;
  return hp;
}

struct CaseSpec {
  std::string name;
  Values values;
  GradOf grad;
  int steps = 5;
  int64_t first_step = 1;
  bool decay = true;
  std::vector<float> multipliers = {1.0f, 0.37f, 1.0f / 65536, 1.0f, 2.5f, 0.01f};
};

CompactCase make_case(const CaseSpec& spec, ElementType grad_type, ElementType moments) {
  CompactCase c{spec.name + ", " + element_type_name(grad_type) + " grads, " +
                    (moments == ElementType::kI8 ? std::string("8-bit") : element_type_name(moments)) + " moments",
                encode(spec.values, moments),
                {}};
  const size_t n = spec.values.master.size();
  for (int k = 0; k < spec.steps; ++k) {
    CompactStep step{varied(k, spec.decay), spec.first_step + k,
                     spec.multipliers[static_cast<size_t>(k) % spec.multipliers.size()],
                     reference::TypedBuffer(grad_type, n)};
    for (size_t i = 0; i < n; ++i) {
      const float g = spec.grad(i, k);
      step.grads.set(i, grad_type == ElementType::kF16 ? std::clamp(g, -6e4f, 6e4f) : g);  // fp16 stays finite
    }
    c.steps.push_back(std::move(step));
  }
  return c;
}

// `n` values of normal(0, 1) * scale(i).
std::vector<float> normals(std::mt19937& rng, size_t n, const std::function<float(size_t)>& scale) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = normal(rng) * scale(i);
  return out;
}

std::vector<float> magnitudes(std::vector<float> values) {
  for (float& x : values) x = std::fabs(x);
  return values;
}

float from_bits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

std::vector<CaseSpec> specs() {
  std::mt19937 rng(20261206);
  std::uniform_real_distribution<float> exponent(-3.0f, 3.0f);
  std::vector<CaseSpec> out;
  const auto constant = [](float s) { return [s](size_t) { return s; }; };
  // Per-element gradient magnitudes over six decades, fresh every step.
  const auto random_grads = [&rng, &exponent](size_t n, int steps) {
    std::vector<std::vector<float>> g;
    for (int k = 0; k < steps; ++k) {
      g.push_back(normals(rng, n, [&](size_t) { return std::pow(10.0f, exponent(rng)); }));
    }
    return [g](size_t i, int k) { return g[static_cast<size_t>(k)][i]; };
  };

  const size_t random_n = 5 * kMomentBlock + 77;
  out.push_back({"random",
                 {normals(rng, random_n, constant(0.05f)), normals(rng, random_n, constant(1e-3f)),
                  magnitudes(normals(rng, random_n, constant(1e-6f)))},
                 random_grads(random_n, 6),
                 6,
                 1000});

  // Block 0 all zeros (master, moments, gradients), block 1 zero gradients on live state, -0 masters.
  {
    const size_t n = 3 * kMomentBlock + 3;
    Values v{normals(rng, n, constant(0.1f)), normals(rng, n, constant(1e-2f)),
             magnitudes(normals(rng, n, constant(1e-4f)))};
    for (size_t i = 0; i < kMomentBlock; ++i) v.master[i] = v.m[i] = v.v[i] = 0.0f;
    for (size_t i = kMomentBlock; i < n; i += 7) v.master[i] = -0.0f;
    const GradOf rest = random_grads(n, 4);
    out.push_back({"zeros", v, [rest](size_t i, int k) { return i < 2 * kMomentBlock ? 0.0f : rest(i, k); }, 4});
  }

  // Subnormal masters, moments (blocks whose absmax is below 2^-126: encoded by division) and gradients.
  {
    const size_t n = 2 * kMomentBlock + 10;
    Values v{normals(rng, n, constant(1e-39f)), normals(rng, n, constant(1e-39f)),
             magnitudes(normals(rng, n, constant(1e-40f)))};
    // Block 0's gradients (zero in fp16) keep its moments subnormal; the others' are fp16 subnormals.
    std::vector<float> g = normals(rng, n, [](size_t i) { return i < kMomentBlock ? 1e-41f : 3e-6f; });
    out.push_back({"subnormal", v, [g](size_t i, int) { return g[i]; }, 4, 1, true, {1.0f, 1e-33f}});
  }

  // Huge gradients (to 1e18: v near 1e33), unscaled and clipped.
  {
    const size_t n = kMomentBlock + 40;
    Values v{normals(rng, n, constant(1.0f)), normals(rng, n, constant(1e3f)),
             magnitudes(normals(rng, n, constant(1e20f)))};
    std::vector<float> g = normals(rng, n, [](size_t i) { return i % 17 == 0 ? 1e18f : 1e15f; });
    out.push_back({"huge", v, [g](size_t i, int) { return g[i]; }, 4, 7, true, {1.0f, 1e-16f}});
  }

  // One outlier gradient per block (1e4 times the rest): its block's small m round to code 0.
  {
    const size_t n = 4 * kMomentBlock;
    const GradOf base = random_grads(n, 5);
    out.push_back(
        {"outlier",
         {normals(rng, n, constant(0.02f)), normals(rng, n, constant(1e-3f)),
          magnitudes(normals(rng, n, constant(1e-6f)))},
         [base](size_t i, int k) { return i % kMomentBlock == 37 ? 1e4f * base(i, k) : base(i, k) * 1e-2f; }});
  }

  // Masters whose bf16 rounding ties (low 16 bits 0x8000, either side), rounds up to bf16 inf, or is
  // FLT_MAX; no weight decay (an L2 term of FLT_MAX would overflow v).
  {
    const size_t n = kMomentBlock;
    Values v{normals(rng, n, constant(1.0f)), normals(rng, n, constant(1e-3f)),
             magnitudes(normals(rng, n, constant(1e-6f)))};
    for (size_t i = 0; i < n; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v.master[i], sizeof bits);
      switch (i % 5) {
        case 0: v.master[i] = from_bits((bits & 0xFFFF0000u) | 0x8000u); break;
        case 1: v.master[i] = from_bits((bits & 0xFFFF0000u) | 0x7FFFu); break;
        case 2: v.master[i] = from_bits(0x7F7F8000u | (bits & 0x80007FFFu)); break;
        default: break;
      }
    }
    v.master[3] = 3.4028235e38f;
    v.master[4] = -3.4028235e38f;
    out.push_back({"ties and overflow", v, random_grads(n, 4), 4, 3, false});
  }

  // Counts shorter than a block, one element, and a block plus one.
  for (size_t n : {size_t{1}, size_t{5}, kMomentBlock - 1, kMomentBlock + 1}) {
    out.push_back({"count " + std::to_string(n),
                   {normals(rng, n, constant(0.05f)), normals(rng, n, constant(1e-3f)),
                    magnitudes(normals(rng, n, constant(1e-6f)))},
                   random_grads(n, 3),
                   3});
  }
  return out;
}

}  // namespace

std::vector<CompactCase> compact_cases() {
  std::vector<CompactCase> cases;
  for (const CaseSpec& spec : specs()) {
    for (ElementType moments : {ElementType::kI8, ElementType::kBF16, ElementType::kF32}) {
      for (ElementType type : {ElementType::kF32, ElementType::kBF16, ElementType::kF16}) {
        cases.push_back(make_case(spec, type, moments));
      }
    }
  }
  return cases;
}

}  // namespace tierzero::cpu_adam::cases
