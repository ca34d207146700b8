// Independent references for the cpu_adam tests: a double-precision scalar Adam/AdamW with
// torch.optim semantics, and typed buffers through the scalar 16-bit conversions of
// tests/common/float16_reference.h.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "cpu_adam/adam.h"
#include "tests/common/float16_reference.h"

namespace tierzero::cpu_adam::reference {

using tierzero::reference::bf16_bits_to_float;
using tierzero::reference::f16_bits_to_float;
using tierzero::reference::float_to_bf16_bits;
using tierzero::reference::float_to_f16_bits;

// Rounds `f` to the nearest value of `type` and back (the identity for fp32).
float round_to(ElementType type, float f);

// One element of CpuAdam::accumulate_scaled: float(dst + float(src * scale)), the product and the sum
// each computed in double (exact for two floats of similar size) and rounded once to float.
float accumulate_scaled(float dst, float src, float scale);

// A buffer of `count` elements of `type`, stored as bytes; values are set and read as float.
class TypedBuffer {
 public:
  TypedBuffer(ElementType type, size_t count);
  ElementType type() const { return type_; }
  size_t size() const { return count_; }
  void set(size_t i, float value);  // rounds to nearest even for 16-bit types
  float get(size_t i) const;
  Elements view();
  ConstElements const_view() const;
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  ElementType type_;
  size_t count_;
  std::vector<uint8_t> bytes_;
};

// Reference optimizer state in double.
struct ReferenceState {
  std::vector<double> params, exp_avg, exp_avg_sq;
};

// One step of torch.optim.Adam / AdamW in double on `grads` (decoded values) times `grad_multiplier`.
// When `state_type` is bf16, m and v are rounded to bf16 after the update, as the kernel stores them;
// when `param_type` is 16-bit, p is rounded to it (through float) after the update (no master).
void reference_step(ReferenceState& state, const std::vector<double>& grads, const AdamHyperParams& hp, int64_t step,
                    double grad_multiplier, ElementType state_type, ElementType param_type = ElementType::kF32);

}  // namespace tierzero::cpu_adam::reference
