#include "tests/cpu_adam/reference.h"

#include <cmath>
#include <cstring>

namespace tierzero::cpu_adam::reference {

float round_to(ElementType type, float f) {
  switch (type) {
    default: return f;  // fp32
    case ElementType::kBF16: return bf16_bits_to_float(float_to_bf16_bits(f));
    case ElementType::kF16: return f16_bits_to_float(float_to_f16_bits(f));
  }
  return f;
}

float accumulate_scaled(float dst, float src, float scale) {
  const float product = static_cast<float>(static_cast<double>(src) * scale);
  return static_cast<float>(static_cast<double>(dst) + product);
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
