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
  const int64_t dim = c.head_dim, max_pos = c.max_position_embeddings;
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
  at::Tensor inv_freq = default_inv_freq(at::Scalar(c.rope_theta), c.head_dim, device);
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

}  // namespace

at::Tensor rope_inv_freq(const ModelConfig& c, int64_t seq_len, at::Device device) {
  const std::string& type = c.rope_scaling.type;
  if (type == "linear") return default_inv_freq(at::Scalar(c.rope_theta), c.head_dim, device) / c.rope_scaling.factor;
  if (type == "dynamic") return dynamic_inv_freq(c, seq_len, device);
  if (type == "llama3") return llama3_inv_freq(c, device);
  return default_inv_freq(at::Scalar(c.rope_theta), c.head_dim, device);
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const ModelConfig& c, int64_t seq_len, at::ScalarType dtype,
                                               at::Device device) {
  at::Tensor positions = at::arange(seq_len, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat);
  at::Tensor freqs = positions.unsqueeze(-1) * rope_inv_freq(c, seq_len, device);
  at::Tensor emb = at::cat({freqs, freqs}, -1);
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace tierzero::engine
