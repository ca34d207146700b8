// tierzero.offload_grad_accumulator end to end through train(): the built-in tiny Llama, ZeRO-3 with
// the optimizer offloaded, 4 micro-batches per step and clipping that bites, trained with the
// micro-batches summed on the "device" (the CPU here) and on the host: the same losses, bit for bit,
// and the header says where the gradients accumulated and why.
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

constexpr int kSteps = 12;

nlohmann::json offloaded_with(const std::string& accumulator) {
  nlohmann::json config = {
      {"gradient_accumulation_steps", 4},
      {"gradient_clipping", 0.05},
      // Small buckets: a bucket holding the whole model would sum the micro-batches itself.
      {"zero_optimization", {{"stage", 3}, {"reduce_bucket_size", 20000}, {"offload_optimizer", {{"device", "cpu"}}}}}};
  if (!accumulator.empty()) config["tierzero"]["offload_grad_accumulator"] = accumulator;
  return config;
}

// The header line naming where offloaded gradients accumulate, or "" when there is none.
std::string accumulator_line(const TrainRun& run) {
  for (const std::string& line : run.lines)
    if (line.find("offloaded gradients accumulate on the ") != std::string::npos) return line;
  return "";
}

TEST(GradAccumulatorTraining, DeviceAndHostAccumulationTrainTheSameLosses) {
  ScratchDir dir;
  TrainRun on_device =
      run_train(train_args(write_config(dir, small_config(offloaded_with("device")), "d.json"), kSteps));
  TrainRun on_host = run_train(train_args(write_config(dir, small_config(offloaded_with("host")), "h.json"), kSteps));
  ASSERT_OK(on_device.summary);
  ASSERT_OK(on_host.summary);
  ASSERT_EQ(on_device.summary->losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(on_device.summary->losses, on_host.summary->losses);
  EXPECT_NE(accumulator_line(on_device).find("accumulate on the device ("), std::string::npos)
      << accumulator_line(on_device);
  EXPECT_NE(accumulator_line(on_host).find("accumulate on the host (tierzero.offload_grad_accumulator \"host\")"),
            std::string::npos)
      << accumulator_line(on_host);
}

TEST(GradAccumulatorTraining, AutoKeepsTheHostWithoutAGpuAndSaysSo) {
  // train picks CUDA wherever it exists, and then "auto" may take the device (the *Gpu tests).
  if (at::hasCUDA()) GTEST_SKIP() << "a CUDA device is present: train would run on it";
  ScratchDir dir;
  TrainRun run = run_train(train_args(write_config(dir, small_config(offloaded_with(""))), 1));
  ASSERT_OK(run.summary);
  EXPECT_NE(accumulator_line(run).find("host (no GPU to accumulate on)"), std::string::npos) << accumulator_line(run);
  TrainRun plain = run_train(train_args(write_config(dir, small_config(), "plain.json"), 1));
  ASSERT_OK(plain.summary);
  EXPECT_EQ(accumulator_line(plain), "") << "no offloaded optimizer, no line";
}

}  // namespace
}  // namespace tierzero::engine::testing
