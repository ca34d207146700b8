#include "engine/model/internal/rope.h"

#include <ATen/ATen.h>

#include <cmath>

namespace tierzero::engine {
namespace {

// 1 / base^(arange(0, dim, 2) / dim) in fp32, as compute_default_rope_parameters.
at::Tensor default_inv_freq(const at::Scalar& base, int64_t dim, at::Device device) {
  at::Tensor exponents = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kFloat).device(device)) / dim;
  return at::reciprocal(at::pow(base, exponents));
}

// Same with a 0-dim fp32 tensor as base (dynamic NTK beyond max_position_embeddings, where HF
// computes the grown base in fp32 tensor arithmetic).
at::Tensor default_inv_freq(const at::Tensor& base, int64_t dim, at::Device device) {
  at::Tensor exponents = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kFloat).device(device)) / dim;
  return at::reciprocal(at::pow(base, exponents));
}

// _compute_dynamic_ntk_parameters: base * ((factor * L / max_pos) - (factor - 1)) ^ (dim / (dim - 2)),
// L = max(seq_len, max_pos).
at::Tensor dynamic_inv_freq(const ModelConfig& c, int64_t seq_len, at::Device device) {
  const double factor = c.rope_scaling.factor;
  const int64_t dim = c.rotary_dim(), max_pos = c.max_position_embeddings;
  const double exponent = static_cast<double>(dim) / static_cast<double>(dim - 2);
  if (seq_len <= max_pos) {
    // HF keeps the inv_freq built at init, with Python doubles and L = max_pos.
    const double grown = c.rope_theta * std::pow(factor * max_pos / max_pos - (factor - 1), exponent);
    return default_inv_freq(at::Scalar(grown), dim, device);
  }
  at::Tensor length = at::scalar_tensor(seq_len, at::TensorOptions().dtype(at::kLong).device(device));
  at::Tensor ratio = (length * factor) / max_pos - (factor - 1);
  at::Tensor base = at::pow(ratio, exponent) * c.rope_theta;
  return default_inv_freq(base, dim, device);
}

// _compute_llama3_parameters: low frequencies divided by factor, high ones kept, the band between
// interpolated.
at::Tensor llama3_inv_freq(const ModelConfig& c, at::Device device) {
  const RopeScaling& s = c.rope_scaling;
  at::Tensor inv_freq = default_inv_freq(at::Scalar(c.rope_theta), c.rotary_dim(), device);
  const double old_context_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_context_len / s.low_freq_factor;
  const double high_freq_wavelen = old_context_len / s.high_freq_factor;
  at::Tensor wavelen = at::reciprocal(inv_freq) * (2 * M_PI);
  at::Tensor llama = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  at::Tensor smooth = (at::reciprocal(wavelen) * s.original_max_position_embeddings - s.low_freq_factor) /
                      (s.high_freq_factor - s.low_freq_factor);
  at::Tensor smoothed = (1 - smooth) * llama / s.factor + smooth * llama;
  at::Tensor is_medium = at::logical_not(wavelen < high_freq_wavelen) * at::logical_not(wavelen > low_freq_wavelen);
  return at::where(is_medium, smoothed, llama);
}

// _compute_longrope_parameters: 1 / (ext_factors * base^(arange(0, dim, 2) / dim)), ext_factors the
// long factors beyond original_max_position_embeddings, the short ones up to it.
at::Tensor longrope_inv_freq(const ModelConfig& c, int64_t seq_len, at::Device device) {
  const RopeScaling& s = c.rope_scaling;
  const std::vector<double>& factors =
      seq_len > s.original_max_position_embeddings ? s.long_factor : s.short_factor;
  at::Tensor ext_factors =
      at::tensor(factors, at::TensorOptions().dtype(at::kDouble)).to(at::TensorOptions().dtype(at::kFloat).device(device));
  const int64_t dim = c.rotary_dim();
  at::Tensor exponents = at::arange(0, dim, 2, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat) / dim;
  return at::reciprocal(ext_factors * at::pow(at::Scalar(c.rope_theta), exponents));
}

// The factor HF's rope init returns with the frequencies, applied to cos and sin: longrope's
// attention_factor (by default sqrt(1 + ln(factor) / ln(original_max_position_embeddings)) when
// factor > 1); 1 for the other types.
double rope_attention_scaling(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.type != "longrope") return 1.0;
  if (s.attention_factor) return *s.attention_factor;
  if (s.factor <= 1.0) return 1.0;
  return std::sqrt(1 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position_embeddings)));
}

}  // namespace

at::Tensor rope_inv_freq(const ModelConfig& c, int64_t seq_len, at::Device device, bool sliding_layer) {
  if (sliding_layer && c.rope_local_base_freq) {
    return default_inv_freq(at::Scalar(*c.rope_local_base_freq), c.rotary_dim(), device);
  }
  const std::string& type = c.rope_scaling.type;
  if (type == "linear") {
    return default_inv_freq(at::Scalar(c.rope_theta), c.rotary_dim(), device) / c.rope_scaling.factor;
  }
  if (type == "dynamic") return dynamic_inv_freq(c, seq_len, device);
  if (type == "llama3") return llama3_inv_freq(c, device);
  if (type == "longrope") return longrope_inv_freq(c, seq_len, device);
  return default_inv_freq(at::Scalar(c.rope_theta), c.rotary_dim(), device);
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const ModelConfig& c, int64_t seq_len, at::ScalarType dtype,
                                               at::Device device, bool sliding_layer) {
  at::Tensor positions = at::arange(seq_len, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat);
  at::Tensor freqs = positions.unsqueeze(-1) * rope_inv_freq(c, seq_len, device, sliding_layer);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  const double scaling = sliding_layer && c.rope_local_base_freq ? 1.0 : rope_attention_scaling(c);
  return {(emb.cos() * scaling).to(dtype), (emb.sin() * scaling).to(dtype)};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t rotary_dim = cos.size(-1);
  auto rotate = [&](const at::Tensor& r) {
    const int64_t half = rotary_dim / 2;
    at::Tensor rotated = at::cat({-r.narrow(-1, half, half), r.narrow(-1, 0, half)}, -1);
    return r * cos + rotated * sin;
  };
  if (rotary_dim == x.size(-1)) return rotate(x);
  return at::cat({rotate(x.narrow(-1, 0, rotary_dim)), x.narrow(-1, rotary_dim, x.size(-1) - rotary_dim)}, -1);
}

}  // namespace tierzero::engine
