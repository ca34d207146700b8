// FrozenPrefetch (engine/model/internal/frozen_prefetch.h): every unit served in the orders a LoRA
// run asks for them (the window's runs of one unit, ascending forwards, descending backwards, jumps)
// equals its host copy. On a CUDA device (skipped without one), while compute-stream work allocates
// and frees memory that unordered side-stream copies could overwrite; on the CPU "device" (the same
// DeviceCopies code, copies run at once), also that a unit asked for twice in a row, or the unit
// just left at the turn, is not copied again, and that a copy never aliases the host weights.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <vector>

#include "engine/model/internal/frozen_prefetch.h"

namespace tierzero::engine {
namespace {

constexpr size_t kUnits = 5;
constexpr int kWeights = 3;
const std::vector<size_t> kOrder = {0, 0, 1, 1, 2, 3, 4, 4, 3, 2, 1, 0, 1, 2, 4, 0, 3, 3, 2};

// kUnits units of kWeights bf16 weights each, sizes differing by unit so a wrong unit shows.
struct HostUnits {
  explicit HostUnits(bool pinned) {
    at::manual_seed(7);
    for (size_t u = 0; u < kUnits; ++u)
      for (int w = 0; w < kWeights; ++w) {
        at::Tensor weight = at::randn({static_cast<int64_t>(256 + 64 * u), 512 + w}).to(at::kBFloat16);
        storage.push_back(pinned ? weight.pin_memory() : weight);
      }
    for (size_t u = 0; u < kUnits; ++u)
      for (int w = 0; w < kWeights; ++w) units[u].push_back(&storage[u * kWeights + w]);
  }
  std::vector<at::Tensor> storage;
  std::vector<std::vector<const at::Tensor*>> units{kUnits};
};

TEST(FrozenPrefetch, ServesEachUnitAsItsHostCopyInEveryOrder) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  HostUnits host(/*pinned=*/true);
  FrozenPrefetch prefetch(host.units, device);
  for (size_t u : kOrder) {
    const std::vector<at::Tensor> weights = prefetch.unit(u);
    ASSERT_EQ(weights.size(), static_cast<size_t>(kWeights));
    for (int w = 0; w < kWeights; ++w) {
      ASSERT_TRUE(weights[w].device() == device);
      // Compute-stream work that allocates and frees, as a unit's forward does.
      const at::Tensor scratch = at::randn({1 << 20}, at::TensorOptions().device(device)).mul(0.5);
      EXPECT_TRUE(at::equal(weights[w].cpu(), *host.units[u][w])) << "unit " << u << " weight " << w;
    }
  }
}

TEST(FrozenPrefetch, OnTheHostServesCopiesAndCopiesEachRunOnce) {
  HostUnits host(/*pinned=*/false);
  FrozenPrefetch prefetch(host.units, at::kCPU);
  std::vector<at::Tensor> last;
  size_t last_unit = kUnits;
  std::vector<at::Tensor> left;  // the unit served before the last one
  size_t left_unit = kUnits;
  for (size_t u : kOrder) {
    const std::vector<at::Tensor> weights = prefetch.unit(u);
    ASSERT_EQ(weights.size(), static_cast<size_t>(kWeights));
    for (int w = 0; w < kWeights; ++w) {
      const at::Tensor& original = *host.units[u][w];
      EXPECT_TRUE(at::equal(weights[w], original)) << "unit " << u << " weight " << w;
      EXPECT_EQ(weights[w].dtype(), original.dtype());
      EXPECT_NE(weights[w].data_ptr(), original.data_ptr()) << "a copy, not the host weight";
    }
    if (u == last_unit) {  // a run of one unit: the same copy
      EXPECT_EQ(weights[0].data_ptr(), last[0].data_ptr()) << "unit " << u << " copied again";
    } else if (u == left_unit && last_unit != kUnits && (last_unit == 0 || last_unit == kUnits - 1)) {
      // The turn at either end: the unit just left is the next one and is kept, not copied again.
      EXPECT_EQ(weights[0].data_ptr(), left[0].data_ptr()) << "unit " << u << " at the turn copied again";
    }
    if (u != last_unit) {
      left = last;
      left_unit = last_unit;
    }
    last = weights;
    last_unit = u;
  }
}

}  // namespace
}  // namespace tierzero::engine
