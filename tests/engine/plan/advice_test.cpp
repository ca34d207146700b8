// Budgets that cannot be met: the problem names the budget and the keys that help, re-planned.
#include <gtest/gtest.h>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(PlanAdvice, GpuOverNamesMicroBatchAndOffload) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 8,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 1},
      "tierzero": {"data": {"seq_len": 2048}}})");
  Machine machine = testing::round_machine();
  machine.gpu_memory_bytes = 24'000'000'000;
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, machine);
  ASSERT_OK(p);
  ASSERT_FALSE(p->feasible());
  ASSERT_EQ(p->problems.size(), 1u);
  const std::string& problem = p->problems[0];
  EXPECT_TRUE(has(problem, "gpu needs")) << problem;
  EXPECT_TRUE(has(problem, "--gpu-memory")) << problem;
  EXPECT_TRUE(has(problem, "train_micro_batch_size_per_gpu")) << problem;
  EXPECT_TRUE(has(problem, "zero_optimization.offload_optimizer.device \"cpu\"")) << problem;
  EXPECT_TRUE(has(problem, "fits")) << problem;
}

TEST(PlanAdvice, HostOverNamesNvme) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})");
  Machine machine = testing::round_machine();
  machine.host_memory_bytes = 16'000'000'000;
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, machine);
  ASSERT_OK(p);
  ASSERT_FALSE(p->feasible());
  const std::string& problem = p->problems[0];
  EXPECT_TRUE(has(problem, "host needs")) << problem;
  EXPECT_TRUE(has(problem, "--host-memory")) << problem;
  EXPECT_TRUE(has(problem, "zero_optimization.offload_optimizer.device \"nvme\"")) << problem;
  // The state layout as one combined setting (the least lossy that fits), not key by key.
  EXPECT_TRUE(has(problem, "set tierzero.master_weights \"compact\" + ")) << problem;
  EXPECT_TRUE(has(problem, "(one layout, together)")) << problem;
  EXPECT_TRUE(has(problem, "fits every host and NVMe budget")) << problem;
  EXPECT_TRUE(has(problem, "let tierzero estimate --suggest choose the whole layout")) << problem;
}

TEST(PlanAdvice, PinnedLimitFromTheConfig) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"pinned_memory_limit": "8GB"}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  ASSERT_FALSE(p->feasible());
  EXPECT_TRUE(has(p->problems[0], "pinned needs")) << p->problems[0];
  EXPECT_TRUE(has(p->problems[0], "tierzero.pinned_memory_limit")) << p->problems[0];
}

TEST(PlanAdvice, GpuMemoryLimitChecksTheAllocatorFigure) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "tierzero": {"gpu_memory_limit": "1GB"}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  ASSERT_FALSE(p->feasible());
  EXPECT_TRUE(has(p->problems[0], "gpu allocated needs")) << p->problems[0];
  EXPECT_TRUE(has(p->problems[0], "tierzero.gpu_memory_limit")) << p->problems[0];
}

TEST(PlanAdvice, FitsWithRoomToSpare) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})");
  Machine machine = testing::round_machine();
  machine.gpu_memory_bytes = 141'000'000'000;
  machine.host_memory_bytes = 128'000'000'000;
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, machine);
  ASSERT_OK(p);
  EXPECT_TRUE(p->feasible()) << (p->problems.empty() ? "" : p->problems[0]);
  const std::string text = format_plan(*p, {"test"});
  EXPECT_TRUE(has(text, "# Result: OK")) << text;
  EXPECT_TRUE(has(text, "predicted step")) << text;
}

}  // namespace
}  // namespace tierzero::engine
