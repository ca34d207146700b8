// Inputs for the exact compact master + 8-bit moments twins (step_portable, step_on_gpu) against
// CpuAdam::step: states and several steps of gradients and hyper-parameters, random and at the edges
// (zeros, subnormals, huge gradients, one outlier per block, bf16 ties and overflow, short counts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpu_adam/adam.h"
#include "tests/cpu_adam/reference.h"

namespace tierzero::cpu_adam::cases {

// The state a step updates, owned; buffers() is its AdamBuffers view with `grads`.
struct Compact8Values {
  std::vector<uint16_t> hi;
  std::vector<int16_t> residual;
  std::vector<uint8_t> m, v;  // kI8 (sign-magnitude bytes), kU8 codes
  std::vector<float> m_scales, v_scales;

  size_t size() const { return hi.size(); }
  AdamBuffers buffers(ConstElements grads);
  bool operator==(const Compact8Values&) const = default;
};

// The first element (by index, over hi, residual, m, v, then the scales) where `a` and `b` differ, named
// with both values; "" when they are equal.
std::string first_difference(const Compact8Values& a, const Compact8Values& b);

struct Compact8Step {
  AdamHyperParams hp;
  int64_t number = 1;
  float grad_multiplier = 1.0f;
  reference::TypedBuffer grads;
};

struct Compact8Case {
  std::string name;
  Compact8Values initial;
  std::vector<Compact8Step> steps;
};

// Every case, each with gradients of each of fp32, bf16 and fp16.
std::vector<Compact8Case> compact8_cases();

}  // namespace tierzero::cpu_adam::cases
