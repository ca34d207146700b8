// Inputs for the exact compact master twins (step_portable, step_on_gpu) against CpuAdam::step: states
// (8-bit, bf16 and fp32 moments) and several steps of gradients and hyper-parameters, random and at the
// edges (zeros, subnormals, huge gradients, one outlier per block, bf16 ties and overflow, short counts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpu_adam/adam.h"
#include "tests/cpu_adam/reference.h"

namespace tierzero::cpu_adam::cases {

// The state a step updates, owned; buffers() is its AdamBuffers view with `grads`.
struct CompactValues {
  ElementType moments = ElementType::kI8;  // kI8 (m kI8, v kU8, with scales), kF32 or kBF16
  std::vector<uint16_t> hi;
  std::vector<int16_t> residual;
  std::vector<uint8_t> m, v;              // the moments' bytes
  std::vector<float> m_scales, v_scales;  // 8-bit moments only

  size_t size() const { return hi.size(); }
  AdamBuffers buffers(ConstElements grads);
  bool operator==(const CompactValues&) const = default;
};

// The first element (by index, over hi, residual, m, v, then the scales) where `a` and `b` differ, named
// with both values; "" when they are equal.
std::string first_difference(const CompactValues& a, const CompactValues& b);

struct CompactStep {
  AdamHyperParams hp;
  int64_t number = 1;
  float grad_multiplier = 1.0f;
  reference::TypedBuffer grads;
};

struct CompactCase {
  std::string name;
  CompactValues initial;
  std::vector<CompactStep> steps;
};

// Every case, each with gradients of each of fp32, bf16 and fp16, and moments of each of 8-bit, bf16 and fp32.
std::vector<CompactCase> compact_cases();

}  // namespace tierzero::cpu_adam::cases
