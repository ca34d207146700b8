// FrozenPrefetch (engine/model/internal/frozen_prefetch.h) on a CUDA device: every unit served in the
// orders a LoRA run asks for them (the window's runs of one unit, ascending forwards, descending
// backwards, jumps) equals its pinned host copy, while compute-stream work allocates and frees
// memory that unordered side-stream copies could overwrite. Skipped without CUDA.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/model/internal/frozen_prefetch.h"

namespace tierzero::engine {
namespace {

TEST(FrozenPrefetch, ServesEachUnitAsItsHostCopyInEveryOrder) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  constexpr size_t kUnits = 5;
  constexpr int kWeights = 3;
  std::vector<at::Tensor> storage;
  at::manual_seed(7);
  for (size_t u = 0; u < kUnits; ++u)
    for (int w = 0; w < kWeights; ++w)  // sizes differ by unit, so a wrong unit shows
      storage.push_back(at::randn({static_cast<int64_t>(256 + 64 * u), 512 + w}).to(at::kBFloat16).pin_memory());
  std::vector<std::vector<const at::Tensor*>> units(kUnits);
  for (size_t u = 0; u < kUnits; ++u)
    for (int w = 0; w < kWeights; ++w) units[u].push_back(&storage[u * kWeights + w]);
  FrozenPrefetch prefetch([&](size_t u) -> const std::vector<const at::Tensor*>& { return units[u]; }, kUnits, device);

  const std::vector<size_t> order = {0, 0, 1, 1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 2, 4, 0, 3, 3, 2};
  for (size_t u : order) {
    const std::vector<at::Tensor> weights = prefetch.unit(u);
    ASSERT_EQ(weights.size(), static_cast<size_t>(kWeights));
    for (int w = 0; w < kWeights; ++w) {
      ASSERT_TRUE(weights[w].device() == device);
      // Compute-stream work that allocates and frees, as a unit's forward does.
      const at::Tensor scratch = at::randn({1 << 20}, at::TensorOptions().device(device)).mul(0.5);
      EXPECT_TRUE(at::equal(weights[w].cpu(), *units[u][w])) << "unit " << u << " weight " << w;
    }
  }
}

}  // namespace
}  // namespace tierzero::engine
