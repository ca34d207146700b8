#include "tests/cpu_adam/reference.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace tierzero::cpu_adam::reference {

float f16_bits_to_float(uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }

uint16_t float_to_f16_bits(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t float_to_bf16_bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const auto down = static_cast<uint16_t>(bits >> 16);  // truncation: toward zero
  if ((bits & 0xFFFF) == 0) return down;
  const auto up = static_cast<uint16_t>(down + 1);  // away from zero (may become inf)
  const double below = std::fabs(static_cast<double>(bf16_bits_to_float(down)) - f);
  const double above = std::fabs(static_cast<double>(bf16_bits_to_float(up)) - f);
  if (std::isinf(bf16_bits_to_float(up))) {
    // Past the largest bf16 by half an ulp or more rounds to inf, as for any binary format.
    const double half_ulp_past_max = std::ldexp(1.0, 127) * (2.0 - std::ldexp(1.0, -8));
    return std::fabs(static_cast<double>(f)) >= half_ulp_past_max ? up : down;
  }
  if (below < above) return down;
  if (above < below) return up;
  return (down & 1) == 0 ? down : up;
}

float round_to(ElementType type, float f) {
  switch (type) {
    case ElementType::kF32: return f;
    case ElementType::kBF16: return bf16_bits_to_float(float_to_bf16_bits(f));
    case ElementType::kF16: return f16_bits_to_float(float_to_f16_bits(f));
  }
  return f;
}

TypedBuffer::TypedBuffer(ElementType type, size_t count)
    : type_(type), count_(count), bytes_(count * element_size(type)) {}

void TypedBuffer::set(size_t i, float value) {
  if (type_ == ElementType::kF32) {
    std::memcpy(&bytes_[i * 4], &value, 4);
    return;
  }
  const uint16_t bits = type_ == ElementType::kBF16 ? float_to_bf16_bits(value) : float_to_f16_bits(value);
  std::memcpy(&bytes_[i * 2], &bits, 2);
}

float TypedBuffer::get(size_t i) const {
  if (type_ == ElementType::kF32) {
    float value;
    std::memcpy(&value, &bytes_[i * 4], 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, &bytes_[i * 2], 2);
  return type_ == ElementType::kBF16 ? bf16_bits_to_float(bits) : f16_bits_to_float(bits);
}

Elements TypedBuffer::view() { return {bytes_.data(), count_, type_}; }

ConstElements TypedBuffer::const_view() const { return {bytes_.data(), count_, type_}; }

void reference_step(ReferenceState& s, const std::vector<double>& grads, const AdamHyperParams& hp, int64_t step,
                    double grad_multiplier, ElementType state_type, ElementType param_type) {
  const double bias_correction1 = hp.bias_correction ? 1.0 - std::pow(hp.beta1, step) : 1.0;
  const double bias_correction2 = hp.bias_correction ? 1.0 - std::pow(hp.beta2, step) : 1.0;
  for (size_t i = 0; i < s.params.size(); ++i) {
    double g = grads[i] * grad_multiplier;
    double& p = s.params[i];
    if (hp.mode == AdamMode::kAdam) {
      g += hp.weight_decay * p;
    } else {
      p *= 1.0 - hp.lr * hp.weight_decay;
    }
    double& m = s.exp_avg[i];
    double& v = s.exp_avg_sq[i];
    m = hp.beta1 * m + (1.0 - hp.beta1) * g;
    v = hp.beta2 * v + (1.0 - hp.beta2) * g * g;
    if (state_type == ElementType::kBF16) {
      m = round_to(ElementType::kBF16, static_cast<float>(m));
      v = round_to(ElementType::kBF16, static_cast<float>(v));
    }
    const double denom = std::sqrt(v) / std::sqrt(bias_correction2) + hp.eps;
    p -= hp.lr / bias_correction1 * m / denom;
    if (param_type != ElementType::kF32) p = round_to(param_type, static_cast<float>(p));
  }
}

}  // namespace tierzero::cpu_adam::reference
