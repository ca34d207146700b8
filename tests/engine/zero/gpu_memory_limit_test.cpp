// tierzero.gpu_memory_limit caps LibTorch's caching allocator (limit_device_memory) even when it is
// the process's first CUDA call, as in `tierzero train`, where the engine sets it before any tensor
// exists (there LibTorch refused it once: "Allocator not initialized for device"). ctest runs each
// test in a process of its own, so this one starts with CUDA untouched. Skips without a GPU.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include "engine/zero/internal/offload_stack.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

TEST(GpuMemoryLimit, CapsTheAllocatorFromAFreshProcess) {
  if (!at::hasCUDA() || at::getNumGPUs() == 0) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  constexpr uint64_t kLimit = 2ull << 30;
  ASSERT_OK(limit_device_memory(device, kLimit));
  const at::TensorOptions bytes = at::TensorOptions().dtype(at::kByte).device(device);
  EXPECT_NO_THROW(at::empty({static_cast<int64_t>(kLimit / 2)}, bytes));
  EXPECT_THROW(at::empty({static_cast<int64_t>(kLimit * 2)}, bytes), c10::OutOfMemoryError);
}

}  // namespace
}  // namespace tierzero::engine
