#include "tests/offload/test_support.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>

#ifdef TIERZERO_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace tierzero::offload::testing {
namespace {

// Copies with cudaMemcpy (cudaMemcpyDefault: either side may be device memory) where a GPU
// exists, else memcpy. A cudaMemcpy from pageable memory into the device may return before its
// DMA lands; it is queued on the default stream, which writeback orders its copy after.
void copy_any(void* dst, const void* src, uint64_t bytes) {
#ifdef TIERZERO_HAVE_CUDA
  static const bool gpu = [] {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }();
  if (gpu) {
    ASSERT_EQ(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), cudaSuccess);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace

TierBudgets small_budgets(const std::string& nvme_dir, uint64_t gpu, uint64_t pinned, uint64_t nvme) {
  TierBudgets b;
  b.gpu_bytes = gpu;
  b.pinned_bytes = pinned;
  b.pinned_arena_bytes = 1 << 20;
  b.nvme_bytes = nvme;
  if (nvme > 0) b.nvme_paths = {nvme_dir};
  b.stripe_bytes = 16 << 10;
  b.chunk_bytes = 64 << 10;
  b.pipeline_depth = 3;
  b.transfer_threads = 4;
  b.prefetch_bytes = 256 << 10;
  return b;
}

std::unique_ptr<nvme::IoEngine> make_io() {
  nvme::IoConfig config;
  config.block_size = 64 << 10;
  Result<std::unique_ptr<nvme::IoEngine>> io = nvme::IoEngine::create(config);
  EXPECT_OK(io);
  return io.ok() ? std::move(io).value() : nullptr;
}

void write_view(const ShardView& view, uint64_t offset, const void* src, uint64_t bytes) {
  ASSERT_NE(view.data, nullptr);
  ASSERT_LE(offset + bytes, view.bytes);
  auto* dst = static_cast<uint8_t*>(view.data) + offset;
  copy_any(dst, src, bytes);
}

std::vector<uint8_t> read_view(const ShardView& view) {
  std::vector<uint8_t> out(view.bytes);
  EXPECT_NE(view.data, nullptr);
  if (view.data == nullptr) return out;
  copy_any(out.data(), view.data, view.bytes);
  return out;
}

std::vector<uint8_t> pinned_contents(TierManager& tm, const std::string& id) {
  Result<ShardView> view = tm.fetch(id, Tier::kPinned).get();
  EXPECT_OK(view);
  std::vector<uint8_t> out = view.ok() ? read_view(*view) : std::vector<uint8_t>();
  EXPECT_OK(tm.release(id).get());
  return out;
}

std::string first_difference(const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual) {
  if (expected.size() != actual.size()) {
    return "size differs: expected " + std::to_string(expected.size()) + " bytes, got " + std::to_string(actual.size());
  }
  uint64_t first = expected.size(), count = 0;
  for (uint64_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i]) continue;
    if (count++ == 0) first = i;
  }
  if (count == 0) return "";
  char text[160];
  std::snprintf(text, sizeof text,
                "first difference at byte %llu of %zu: expected 0x%02x, actual 0x%02x (%llu bytes differ)",
                static_cast<unsigned long long>(first), expected.size(), expected[first], actual[first],
                static_cast<unsigned long long>(count));
  return text;
}

std::vector<uint8_t> pattern(uint64_t seed, uint64_t bytes) {
  std::vector<uint8_t> out(bytes);
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < bytes; i += 8) {
    const uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<uint64_t>(8, bytes - i));
  }
  return out;
}

}  // namespace tierzero::offload::testing
