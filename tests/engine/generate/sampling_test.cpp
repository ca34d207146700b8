// The next-token choice (engine/generate/internal/sampling.h) against a plain reference of
// transformers' TopKLogitsWarper and TopPLogitsWarper written here with sorting in double.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "engine/generate/internal/sampling.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

// The ids transformers' warpers keep for `logits` (temperature 1): the k largest (ties with the
// k-th kept), then, in ascending order of score, every token whose cumulative softmax exceeds 1 - top_p.
std::set<int64_t> reference_kept(const std::vector<float>& logits, std::optional<int64_t> top_k, double top_p) {
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return logits[a] < logits[b]; });
  std::set<int64_t> kept(order.begin(), order.end());
  if (top_k) {
    const float kth = logits[order[order.size() - std::min<size_t>(*top_k, order.size())]];
    std::erase_if(kept, [&](int64_t i) { return logits[i] < kth; });
  }
  std::vector<int64_t> ascending;
  for (int64_t i : order)
    if (kept.count(i)) ascending.push_back(i);
  double total = 0;
  for (int64_t i : ascending) total += std::exp(static_cast<double>(logits[i]));
  double cumulative = 0;
  for (size_t j = 0; j + 1 < ascending.size(); ++j) {  // the most likely token always stays
    cumulative += std::exp(static_cast<double>(logits[ascending[j]])) / total;
    if (cumulative <= 1.0 - top_p) kept.erase(ascending[j]);
  }
  return kept;
}

std::set<int64_t> finite_ids(const at::Tensor& scores) {
  std::set<int64_t> ids;
  for (int64_t i = 0; i < scores.size(0); ++i)
    if (std::isfinite(scores[i].item<float>())) ids.insert(i);
  return ids;
}

TEST(Sampling, WarpersKeepWhatTransformersKeeps) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(11);
  for (int trial = 0; trial < 20; ++trial) {
    const at::Tensor logits = at::randn({40}, generator) * 2.0;
    const std::vector<float> values(logits.data_ptr<float>(), logits.data_ptr<float>() + 40);
    for (const auto& [top_k, top_p] : std::vector<std::pair<std::optional<int64_t>, double>>{
             {std::nullopt, 0.5}, {std::nullopt, 0.9}, {5, 1.0}, {1, 1.0}, {12, 0.7}, {40, 0.95}, {3, 0.05}}) {
      const SamplingOptions options{.temperature = 1.0, .top_k = top_k, .top_p = top_p};
      EXPECT_EQ(finite_ids(warp_logits(logits, options)), reference_kept(values, top_k, top_p))
          << "trial " << trial << " top_k " << top_k.value_or(0) << " top_p " << top_p;
    }
  }
}

TEST(Sampling, TemperatureScalesAndTiesAtTheKthAreKept) {
  const at::Tensor logits = at::tensor({1.0f, 3.0f, 2.0f, 3.0f, 0.5f});
  const at::Tensor scaled = warp_logits(logits, {.temperature = 0.5});
  EXPECT_TRUE(at::equal(scaled, logits / 0.5));
  EXPECT_EQ(finite_ids(warp_logits(logits, {.temperature = 1.0, .top_k = 1})), (std::set<int64_t>{1, 3}));
}

TEST(Sampling, GreedyTakesTheFirstMaximumAndDrawsStayInTheKeptSet) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0);
  const at::Tensor logits = at::tensor({0.0f, 4.0f, 1.0f, 4.0f, 3.9f, -2.0f});
  EXPECT_EQ(choose_token(logits, {}, generator), 1);
  const SamplingOptions top3{.temperature = 2.0, .top_k = 3};
  std::set<int64_t> drawn;
  for (int i = 0; i < 300; ++i) drawn.insert(choose_token(logits, top3, generator));
  EXPECT_EQ(drawn, (std::set<int64_t>{1, 3, 4}));
  // The same seed draws the same tokens.
  at::Generator a = at::make_generator<at::CPUGeneratorImpl>(5), b = at::make_generator<at::CPUGeneratorImpl>(5);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(choose_token(logits, top3, a), choose_token(logits, top3, b));
}

TEST(Sampling, OutOfRangeOptionsAreRefusedByName) {
  EXPECT_ERROR(check_sampling({.temperature = -1.0}), ErrorCode::kInvalidArgument, "--temperature");
  EXPECT_ERROR(check_sampling({.top_k = 0}), ErrorCode::kInvalidArgument, "--top-k");
  EXPECT_ERROR(check_sampling({.top_p = 0.0}), ErrorCode::kInvalidArgument, "--top-p");
  EXPECT_OK(check_sampling({.temperature = 0.7, .top_k = 4, .top_p = 0.9}));
}

}  // namespace
}  // namespace tierzero::engine
