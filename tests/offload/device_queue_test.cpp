// DeviceQueue (DeviceCopies::queue, offload/torch/offload_torch.h): work queued in order on a queue of its own. On the
// CPU "device" (a thread of the queue's): a copy to the "device", a kernel over it and the copy back run in the order
// queued, after the host returned from queuing them (a mark's ran() turns true, its wait returns), the source
// untouched; a kernel's error stops the work queued after it and is thrown by every wait from then on. On a CUDA device
// (DeviceQueueGpu, skipped without one): the copies there and back, the kernel called with the queue's stream.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "offload/torch/offload_torch.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

TEST(DeviceQueue, RunsCopiesAndKernelsInTheOrderQueued) {
  const std::unique_ptr<DeviceQueue> queue = DeviceCopies::create(at::kCPU, /*timing=*/false)->queue();
  std::vector<int> source(1000), device(1000, -1), back(1000, -1);
  for (int i = 0; i < 1000; ++i) source[i] = 3 * i - 7;
  std::atomic<bool> release{false};
  // A kernel that waits: everything after it must wait too, and the host goes on meanwhile.
  queue->to_device(device.data(), source.data(), source.size() * sizeof(int));
  ASSERT_OK(queue->launch([&](void* stream) {
    EXPECT_EQ(stream, nullptr);
    while (!release.load()) std::this_thread::yield();
    for (int& x : device) x *= 2;
    return Status();
  }));
  queue->to_host(back.data(), device.data(), device.size() * sizeof(int));
  const std::unique_ptr<QueueMark> mark = queue->mark();
  EXPECT_FALSE(mark->ran()) << "the kernel is held: the copy back cannot have run";
  release = true;
  mark->wait_host();
  EXPECT_TRUE(mark->ran());
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(back[i], 2 * (3 * i - 7)) << i;
    ASSERT_EQ(source[i], 3 * i - 7) << i;
  }
}

TEST(DeviceQueue, AKernelsErrorStopsTheRestAndIsThrownByTheWaits) {
  const std::unique_ptr<DeviceQueue> queue = DeviceCopies::create(at::kCPU, /*timing=*/false)->queue();
  int device = 5, back = -1;
  ASSERT_OK(queue->launch([](void*) { return invalid_argument("the kernel refused its buffers"); }));
  queue->to_host(&back, &device, sizeof device);
  const std::unique_ptr<QueueMark> mark = queue->mark();
  EXPECT_THROW(mark->wait_host(), Error);
  EXPECT_THROW(mark->ran(), Error);
  EXPECT_EQ(back, -1) << "the copy after the failed kernel ran";
  try {
    queue->mark()->wait_host();
    FAIL() << "a later mark's wait did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the kernel refused its buffers"), std::string::npos) << e.what();
  }
}

TEST(DeviceQueueGpu, CopiesThereAndBackAroundAKernelOnItsStream) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  const std::unique_ptr<DeviceQueue> queue = DeviceCopies::create(device, /*timing=*/false)->queue();
  const at::Tensor source = at::arange(1 << 20, at::kInt).pin_memory();
  const at::Tensor back = at::full({1 << 20}, -1, at::kInt).pin_memory();
  const at::Tensor on_device = at::empty({1 << 20}, at::TensorOptions().dtype(at::kInt).device(device));
  queue->to_device(on_device.data_ptr(), source.const_data_ptr(), source.nbytes());
  void* seen = nullptr;
  ASSERT_OK(queue->launch([&](void* stream) {
    seen = stream;
    return Status();
  }));
  EXPECT_NE(seen, nullptr) << "CUDA calls the kernel's enqueue with the queue's stream, at once";
  queue->to_host(back.data_ptr(), on_device.const_data_ptr(), back.nbytes());
  const std::unique_ptr<QueueMark> mark = queue->mark();
  mark->wait_host();
  EXPECT_TRUE(mark->ran());
  EXPECT_TRUE(at::equal(back, source));
}

}  // namespace
}  // namespace tierzero::offload
