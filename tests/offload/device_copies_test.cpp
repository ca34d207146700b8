// DeviceCopies::upload (offload/torch/offload_torch.h): host tensors copied into new tensors on the
// device, one CopyDone for them all. On the CPU "device" (the same code path, copies run at once):
// each new tensor equals its source (dtype, shape, bytes) in memory of its own, the sources are
// untouched, and an empty list gives an empty upload; on a CUDA device (DeviceCopiesGpu, skipped
// without one), the same after the compute stream is ordered after the copy, while compute-stream
// work allocates and frees memory an unordered copy could overwrite. CopyProbe::create without a GPU
// is refused as kUnsupported, which bench pcie reports as skipped.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "offload/torch/offload_torch.h"
#include "tests/support/status_matchers.h"

namespace tierzero::offload {
namespace {

// Host tensors of several dtypes and shapes, a wrong pairing or a short copy shows.
std::vector<at::Tensor> host_tensors(bool pinned) {
  at::manual_seed(11);
  std::vector<at::Tensor> out = {at::randn({37, 129}).to(at::kBFloat16), at::randn({5}),
                                 at::randint(0, 1 << 20, {3, 4, 7}, at::kLong)};
  if (pinned)
    for (at::Tensor& t : out) t = t.pin_memory();
  return out;
}

std::vector<const at::Tensor*> pointers(const std::vector<at::Tensor>& tensors) {
  std::vector<const at::Tensor*> out;
  for (const at::Tensor& t : tensors) out.push_back(&t);
  return out;
}

void expect_copies_of(const std::vector<at::Tensor>& copies, const std::vector<at::Tensor>& sources,
                      at::Device device) {
  ASSERT_EQ(copies.size(), sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_TRUE(copies[i].device() == device) << i;
    EXPECT_EQ(copies[i].dtype(), sources[i].dtype()) << i;
    EXPECT_EQ(copies[i].sizes(), sources[i].sizes()) << i;
    EXPECT_TRUE(at::equal(copies[i].cpu(), sources[i])) << i;
    EXPECT_NE(copies[i].data_ptr(), sources[i].data_ptr()) << i;
  }
}

TEST(DeviceCopies, UploadCopiesHostTensorsIntoNewTensors) {
  const std::vector<at::Tensor> sources = host_tensors(/*pinned=*/false);
  std::vector<at::Tensor> before;
  for (const at::Tensor& t : sources) before.push_back(t.clone());
  const std::unique_ptr<DeviceCopies> copies = DeviceCopies::create(at::kCPU, /*timing=*/true);
  DeviceUpload upload = copies->upload(pointers(sources));
  ASSERT_NE(upload.done, nullptr);
  upload.done->order_current_stream();
  upload.done->wait_host();
  EXPECT_GE(upload.done->seconds(), 0.0);
  expect_copies_of(upload.tensors, sources, at::kCPU);
  for (size_t i = 0; i < sources.size(); ++i)
    EXPECT_TRUE(at::equal(sources[i], before[i])) << "source " << i << " changed";
  // The copies are the device's own: writing one leaves its source as it was.
  upload.tensors[1].fill_(3.0f);
  EXPECT_TRUE(at::equal(sources[1], before[1]));
}

TEST(DeviceCopies, UploadOfNothingIsEmptyAndDone) {
  const std::unique_ptr<DeviceCopies> copies = DeviceCopies::create(at::kCPU, /*timing=*/false);
  DeviceUpload upload = copies->upload({});
  EXPECT_TRUE(upload.tensors.empty());
  ASSERT_NE(upload.done, nullptr);
  upload.done->wait_host();
}

TEST(DeviceCopiesGpu, UploadIsReadableAfterOrderingTheComputeStream) {
  if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  const std::vector<at::Tensor> sources = host_tensors(/*pinned=*/true);
  const std::unique_ptr<DeviceCopies> copies = DeviceCopies::create(device, /*timing=*/true);
  for (int round = 0; round < 8; ++round) {
    // Compute-stream work queued before the copy, on memory the allocator hands out again.
    at::Tensor scratch = at::randn({1 << 22}, at::TensorOptions().device(device)).mul(0.5);
    scratch.reset();
    DeviceUpload upload = copies->upload(pointers(sources));
    upload.done->order_current_stream();
    expect_copies_of(upload.tensors, sources, device);
    upload.done->wait_host();
    EXPECT_GT(upload.done->seconds(), 0.0);
  }
}

TEST(CopyProbe, WithoutAGpuIsUnsupported) {
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_ERROR(CopyProbe::create(1 << 20), ErrorCode::kUnsupported, "CUDA");
}

}  // namespace
}  // namespace tierzero::offload
