#include "engine/plan/internal/model_params.h"

#include <algorithm>
#include <numeric>
#include <utility>

namespace tierzero::engine::plan {
namespace {

// One decoder layer's parameters in unit_params order (engine/model/internal/layer_ops.h): input
// norm, q, k, v (each weight then bias where present; Phi-3: one fused qkv), q/k norms, o,
// post-attention norm, [Gemma: pre-feed-forward norm], gate, up (Phi-3: one fused gate_up), down,
// [Gemma: post-feed-forward norm].
std::vector<int64_t> layer_params(const ModelDims& m) {
  const int64_t h = m.hidden_size, q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  const int64_t i = m.intermediate_size;
  if (m.fused_projections) return {h, (q + 2 * kv) * h, h * q, h, 2 * i * h, h * i};
  std::vector<int64_t> p = {h, q * h};
  if (m.qkv_bias) p.push_back(q);
  p.push_back(kv * h);
  if (m.qkv_bias) p.push_back(kv);
  p.push_back(kv * h);
  if (m.qkv_bias) p.push_back(kv);
  if (m.qk_norm) p.insert(p.end(), {m.head_dim, m.head_dim});
  p.push_back(h * q);
  if (m.o_proj_bias) p.push_back(h);
  p.push_back(h);
  if (m.sandwich_norms) p.push_back(h);
  for (int64_t out : {i, i, h}) {
    p.push_back(out * (out == h ? i : h));
    if (m.mlp_bias) p.push_back(out);
  }
  if (m.sandwich_norms) p.push_back(h);
  return p;
}

}  // namespace

std::vector<std::vector<int64_t>> unit_param_numels(const ModelDims& m) {
  std::vector<std::vector<int64_t>> units = {{m.vocab_size * m.hidden_size}};
  units.insert(units.end(), static_cast<size_t>(m.num_hidden_layers), layer_params(m));
  units.push_back({m.hidden_size, m.vocab_size * m.hidden_size});
  return units;
}

std::vector<int64_t> distinct_param_numels(const ModelDims& m) {
  std::vector<int64_t> all;
  for (const std::vector<int64_t>& unit : unit_param_numels(m)) all.insert(all.end(), unit.begin(), unit.end());
  if (m.tie_word_embeddings) all.pop_back();  // the LM head is the embedding
  return all;
}

std::vector<int64_t> unit_numels(const ModelDims& m) {
  std::vector<int64_t> units;
  for (const std::vector<int64_t>& unit : unit_param_numels(m))
    units.push_back(std::accumulate(unit.begin(), unit.end(), int64_t{0}));
  return units;
}

int64_t grad_ring_slots(const ModelDims& m, int64_t record_numel) {
  const std::vector<int64_t> units = unit_numels(m);
  const int64_t embedding = m.vocab_size * m.hidden_size;
  const auto records_of = [record_numel](int64_t begin, int64_t end) {  // record indices [first, last + 1)
    return std::make_pair(begin / record_numel, (end + record_numel - 1) / record_numel);
  };
  int64_t needed = 0, begin = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    const bool tied_head = m.tie_word_embeddings && u + 1 == units.size();  // the LM head is the embedding
    const int64_t end = begin + units[u] - (tied_head ? embedding : 0);
    const auto [first, last] = records_of(begin, end);
    int64_t held = last - first;
    if (m.tie_word_embeddings && u > 0) {  // the embedding's records, held since the head's landing
      const auto [e_first, e_last] = records_of(0, embedding);
      held += e_last - e_first - std::max<int64_t>(0, std::min(e_last, last) - std::max(e_first, first));
    }
    needed = std::max(needed, held);
    begin = end;
  }
  return needed;
}

int64_t layer_matmul_params(const ModelDims& m) {
  const int64_t q = m.num_attention_heads * m.head_dim, kv = m.num_key_value_heads * m.head_dim;
  return m.hidden_size * (q + 2 * kv) + q * m.hidden_size + 3 * m.hidden_size * m.intermediate_size;
}

uint64_t window_bytes(int64_t micro_batches, int64_t tokens, int64_t hidden_size, int64_t units,
                      int64_t largest_unit, int compute_bytes) {
  if (micro_batches < 2) return 0;
  const auto kept = static_cast<uint64_t>((micro_batches - 1) * units);  // inputs + an output gradient
  return kept * static_cast<uint64_t>(tokens * hidden_size * compute_bytes) +
         static_cast<uint64_t>(largest_unit) * sizeof(float);
}

double flops_per_token(const ModelDims& m, int64_t seq_len, bool weight_grads, int64_t kept_layers) {
  const double layer = static_cast<double>(layer_matmul_params(m));
  const double matmul =
      static_cast<double>(m.num_hidden_layers) * layer + static_cast<double>(m.vocab_size) * static_cast<double>(m.hidden_size);
  const double attention_forward =
      4.0 * static_cast<double>(m.num_attention_heads * m.head_dim) * static_cast<double>(seq_len);
  const double recomputation_saved = static_cast<double>(kept_layers) * (2.0 * layer + attention_forward);
  return (weight_grads ? 8.0 : 6.0) * matmul + 4.0 * static_cast<double>(m.num_hidden_layers) * attention_forward -
         recomputation_saved;
}

}  // namespace tierzero::engine::plan

namespace tierzero::engine {

int64_t parameter_count(const ModelDims& model) {
  const std::vector<int64_t> all = plan::distinct_param_numels(model);
  return std::accumulate(all.begin(), all.end(), int64_t{0});
}

}  // namespace tierzero::engine
