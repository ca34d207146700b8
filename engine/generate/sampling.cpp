// Choosing the next token (internal/sampling.h): transformers' greedy search and its sampling with
// TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, in that order.
#include "engine/generate/internal/sampling.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace tierzero::engine {

Status check_sampling(const SamplingOptions& o) {
  if (!(o.temperature >= 0.0) || !std::isfinite(o.temperature))
    return invalid_argument(fmt::format("--temperature: must be a number >= 0 (0 = greedy), got {}", o.temperature));
  if (o.top_k && *o.top_k < 1)
    return invalid_argument(fmt::format("--top-k: must be a whole number >= 1, got {}", *o.top_k));
  if (!(o.top_p > 0.0 && o.top_p <= 1.0))
    return invalid_argument(fmt::format("--top-p: must be a number in (0, 1], got {}", o.top_p));
  return {};
}

at::Tensor warp_logits(const at::Tensor& logits, const SamplingOptions& o) {
  const double minus_inf = -std::numeric_limits<double>::infinity();
  at::Tensor scores = logits / o.temperature;
  if (o.top_k) {
    const int64_t k = std::min<int64_t>(*o.top_k, scores.size(-1));
    const at::Tensor kth = std::get<0>(at::topk(scores, k)).narrow(-1, k - 1, 1);
    scores = scores.masked_fill(scores < kth, minus_inf);
  }
  if (o.top_p < 1.0) {
    auto [sorted, order] = at::sort(scores, /*dim=*/-1, /*descending=*/false);
    at::Tensor remove = sorted.softmax(-1).cumsum(-1) <= (1.0 - o.top_p);
    remove.narrow(-1, remove.size(-1) - 1, 1).fill_(false);  // the most likely token stays
    scores = scores.masked_fill(remove.scatter(-1, order, remove), minus_inf);
  }
  return scores;
}

int64_t choose_token(const at::Tensor& logits, const SamplingOptions& o, at::Generator& generator) {
  if (o.temperature == 0.0) return logits.argmax().item<int64_t>();
  const at::Tensor probs = warp_logits(logits.to(at::kCPU, at::kFloat), o).softmax(-1);
  return at::multinomial(probs, /*num_samples=*/1, /*replacement=*/false, generator).item<int64_t>();
}

}  // namespace tierzero::engine
