// The optimizer step inside the backward (backward_step.h): the CPU optimizer steps a sub-group
// only once its gradients are final, last to first, with the after-backward step's results bit for
// bit; and whole training runs that step inside the backward equal the same runs stepping after it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "cpu_adam/adam.h"
#include "engine/layout/layout.h"
#include "engine/zero/internal/grads_final.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/record_adam.h"
#include "tests/engine/zero/scenario.h"

namespace tierzero::engine::testing {
namespace {

using namespace std::chrono_literals;

TEST(GradsFinal, WaitReturnsOnceTheSuffixIsMarkedAndThrowsOnFailure) {
  GradsFinal grads;
  grads.start(100);
  grads.mark_from(60);
  grads.wait_from(60);  // already final: returns at once
  std::thread waiter([&] { grads.wait_from(10); });
  std::this_thread::sleep_for(20ms);
  grads.mark_from(80);  // a larger start changes nothing
  grads.mark_from(10);
  waiter.join();
  grads.start(100);
  std::thread failing([&] { EXPECT_THROW(grads.wait_from(0), Error); });
  grads.fail(internal_error("the backward failed"));
  failing.join();
}

// The CPU optimizer with its state in host memory (every record in its block, no swap file) over
// `master`'s elements in sub-groups of `group`, from `master` (fp32; m and v zero), writing bf16
// weights in place.
std::unique_ptr<PartitionOptimizer> host_adam(const cpu_adam::CpuAdam& adam, DeviceCopies& copies,
                                              const at::Tensor& master, int64_t group) {
  RecordAdamSetup setup;
  setup.config.weight_decay = 0.01;
  setup.adam = &adam;
  setup.copies = &copies;
  setup.sub_group_numel = group;
  const state_layout::Records records{.partition = master.numel(), .sub_group = group};
  setup.memory_records = at::zeros({records.bytes(record_layout(at::kFloat, false), 0, records.count())}, at::kByte);
  setup.numel = master.numel();
  setup.load_master = [master](int64_t begin, const at::Tensor& out) {
    out.copy_(master.narrow(0, begin, out.numel()));
  };
  return make_record_adam(std::move(setup));
}

TEST(BackwardStep, CpuOptimizerStepsSubGroupsLastToFirstOnceTheirGradientsAreFinal) {
  constexpr int64_t kNumel = 4096, kGroup = 1024, kHalf = kNumel / 2;
  const cpu_adam::CpuAdam adam(cpu_adam::CpuAdamOptions{.threads = 2});
  const std::unique_ptr<DeviceCopies> copies = DeviceCopies::create(at::kCPU, false);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(7);
  const at::Tensor master = at::randn({kNumel}, gen);
  const at::Tensor grad = at::randn({kNumel}, gen);

  // The step after the backward: the whole gradient at once.
  const at::Tensor want = at::zeros({kNumel}, at::kBFloat16);
  std::unique_ptr<PartitionOptimizer> reference = host_adam(adam, *copies, master, kGroup);
  reference->step(grad, 1.0, 1e-2, want, nullptr, nullptr);

  // Inside the backward: the gradient's upper half lands first.
  std::unique_ptr<PartitionOptimizer> optimizer = host_adam(adam, *copies, master, kGroup);
  const at::Tensor landing = at::zeros({kNumel});
  const at::Tensor got = at::zeros({kNumel}, at::kBFloat16);
  GradsFinal grads_final;
  grads_final.start(kNumel);
  std::thread step([&] { optimizer->step(landing, 1.0, 1e-2, got, nullptr, &grads_final); });
  landing.narrow(0, kHalf, kHalf).copy_(grad.narrow(0, kHalf, kHalf));
  grads_final.mark_from(kHalf);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!at::equal(got.narrow(0, kHalf, kHalf), want.narrow(0, kHalf, kHalf)) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(50ms);  // time to step what it must not
  const bool upper_done = at::equal(got.narrow(0, kHalf, kHalf), want.narrow(0, kHalf, kHalf));
  const bool lower_untouched = at::count_nonzero(got.narrow(0, 0, kHalf)).item<int64_t>() == 0;
  landing.narrow(0, 0, kHalf).copy_(grad.narrow(0, 0, kHalf));
  grads_final.mark_from(0);
  step.join();
  EXPECT_TRUE(upper_done) << "the sub-groups whose gradients were final were not stepped";
  EXPECT_TRUE(lower_untouched) << "a sub-group was stepped before its gradients were final";
  EXPECT_TRUE(at::equal(got, want)) << "inside the backward the step differs from the step after it";
  EXPECT_TRUE(at::equal(optimizer->state().master, reference->state().master));
  EXPECT_TRUE(at::equal(optimizer->state().exp_avg_sq, reference->state().exp_avg_sq));
}

// Runs `s` planned (the optimizer inside the backward) and unplanned (after it): equal bit for bit.
void expect_same_inside_and_after_backward(Scenario s) {
  s.stage = 3;
  s.offload = true;
  s.accumulation = 3;
  s.steps = 4;
  s.clip = 0.0;
  s.plan_steps = true;
  const TrainTrace inside = train_one_rank(s);
  s.plan_steps = false;
  EXPECT_EQ(compare_exactly(inside, train_one_rank(s)), "") << s.name();
}

TEST(BackwardStep, TrainingEqualsTheStepAfterTheBackwardBitForBit) {
  Scenario s;
  s.sub_group_numel = 1024;  // many sub-groups, so the step runs well inside the backward
  expect_same_inside_and_after_backward(s);
  s.dtype = "bf16";
  s.master = "compact";
  s.state_dtype = "int8";
  s.sub_group_numel = 2048;
  expect_same_inside_and_after_backward(s);
  s.offload_params = true;
  expect_same_inside_and_after_backward(s);
}

// A bf16 scenario with the optimizer's records on NVMe under TempDir()/`dir_name`, 3 swap buffers.
Scenario nvme_scenario(const std::string& dir_name) {
  const std::string dir = ::testing::TempDir() + "/" + dir_name;
  std::filesystem::create_directories(dir);
  Scenario s;
  s.dtype = "bf16";
  s.sub_group_numel = 1024;
  s.nvme_dir = dir;
  s.nvme_buffers = 3;
  return s;
}

TEST(BackwardStep, NvmeOptimizerWithSomeRecordsInMemoryEqualsTheStepAfterTheBackward) {
  Scenario s = nvme_scenario("backward_step_nvme");
  s.records_in_memory = 4;  // the first records in pinned memory, the rest streamed
  expect_same_inside_and_after_backward(s);
}

// The scenario's smallest gradient ring: the count the engine asks for when given one slot.
int64_t smallest_ring(Scenario s) {
  s.grad_ring_records = 1;
  try {
    (void)train_one_rank(s);
  } catch (const Error& e) {
    const std::string message = e.what();
    const size_t at = message.find("set it to at least ");
    if (at != std::string::npos) return std::stoll(message.substr(at + 19));
    ADD_FAILURE() << message;
  }
  ADD_FAILURE() << s.name() << ": one ring slot was not refused";
  return 0;
}

// Runs `s` with the whole gradient partition, then with gradient rings of the fewest records the
// backward needs (it waits for the optimizer to free a slot at every record) and of more: the same
// losses and weights bit for bit; the gradient norms, summed over runs cut at other places, agree
// to rounding.
void expect_ring_equals_partition(Scenario s) {
  s.stage = 3;
  s.offload = true;
  s.accumulation = 3;
  s.steps = 4;
  s.clip = 0.0;
  s.plan_steps = true;
  const TrainTrace partition = train_one_rank(s);
  const int64_t fewest = smallest_ring(s);
  ASSERT_GT(fewest, 1) << s.name();
  for (const int64_t ring : {fewest, fewest + 3}) {
    s.grad_ring_records = ring;
    TrainTrace got = train_one_rank(s);
    ASSERT_EQ(got.grad_norms.size(), partition.grad_norms.size()) << s.name();
    for (size_t i = 0; i < got.grad_norms.size(); ++i)
      EXPECT_NEAR(got.grad_norms[i], partition.grad_norms[i], 1e-12 * partition.grad_norms[i]) << s.name();
    got.grad_norms = partition.grad_norms;
    EXPECT_EQ(compare_exactly(got, partition), "") << s.name();
  }
}

TEST(GradRing, HostOptimizerEqualsTheWholePartitionBitForBit) {
  Scenario s;
  s.sub_group_numel = 1024;  // tied: the embedding's records are held from the head's landing to unit 0's
  expect_ring_equals_partition(s);
  s.dtype = "bf16";
  s.master = "compact";
  s.state_dtype = "int8";
  s.host_grads = "bf16";
  s.tied = false;
  expect_ring_equals_partition(s);
}

TEST(GradRing, NvmeOptimizerEqualsTheWholePartitionBitForBit) {
  Scenario s = nvme_scenario("grad_ring_nvme");
  s.host_grads = "bf16";
  expect_ring_equals_partition(s);
  s.records_in_memory = 4;  // the first records in pinned memory, the rest streamed
  expect_ring_equals_partition(s);
}

TEST(GradRing, RefusesAStepThatWouldReadTheWholeGradient) {
  Scenario s;
  s.stage = 3;
  s.offload = true;
  s.accumulation = 3;
  s.steps = 2;
  s.clip = 0.0;
  s.sub_group_numel = 1024;
  s.grad_ring_records = 64;  // more than enough
  s.plan_steps = false;      // the step would run after the backward, from the whole partition
  EXPECT_THROW((void)train_one_rank(s), Error);
  s.plan_steps = true;
  s.clip = 1.0;  // clipping needs the whole gradient's norm first: the engine refuses the ring
  EXPECT_THROW((void)train_one_rank(s), Error);
}

}  // namespace
}  // namespace tierzero::engine::testing
