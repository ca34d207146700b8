// The time terms against the formulas worked by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

using testing::kLlama135bParams;

const TimeTerm& term(const Plan& p, const std::string& what) {
  for (const TimeTerm& t : p.time_terms)
    if (t.what == what) return t;
  ADD_FAILURE() << what;
  return p.time_terms.front();
}

TEST(PlanTime, Stage3OptimizerOnCpu) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 4, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "tierzero": {"data": {"seq_len": 16}}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  const double n = static_cast<double>(kLlama135bParams);
  const double tokens = 2 * 16 * 4;
  const double matmul = 24.0 * (4 * 2048.0 * 2048 + 3 * 2048.0 * 5504) + 32000.0 * 2048;
  const double flops = tokens * (8 * matmul + 16.0 * 24 * 2048 * 16);
  EXPECT_DOUBLE_EQ(term(*p, "gpu compute").seconds, flops / 100e12);
  // No budget: the device accumulator and the window run, so the fp32 sums land once per step.
  EXPECT_DOUBLE_EQ(term(*p, "pcie d2h").seconds, 4 * n / 10e9);
  EXPECT_DOUBLE_EQ(term(*p, "pcie h2d").seconds, 2 * n / 10e9);  // the updated bf16 weights
  // The CPU Adam reads the fp32 master, gradient, m, v (16 B), writes master, m, v (12 B) and the
  // bf16 weight (2 B), at the machine's 10 GB/s.
  const double adam = 30 * n / 10e9;
  EXPECT_DOUBLE_EQ(term(*p, "cpu adam").seconds, adam);
  EXPECT_DOUBLE_EQ(term(*p, "nvme").seconds, 0.0);
  // Stage 3 offloaded and overlapped: the optimizer step follows into the forward and the backward
  // waits for it, so the step is max(forward, cpu adam, nvme) + backward (a quarter of the FLOPs forward).
  EXPECT_EQ(p->bottleneck, "optimizer step, then the backward (max(forward, cpu adam, nvme) + backward)");
  EXPECT_DOUBLE_EQ(p->step_seconds, std::max(0.25 * flops / 100e12, adam) + 0.75 * flops / 100e12);
  double sum = 0;
  for (const TimeTerm& t : p->time_terms) sum += t.seconds;
  EXPECT_DOUBLE_EQ(p->serial_step_seconds, sum);
  EXPECT_EQ(p->tokens_per_step, 128);
}

// tierzero.gpu_optimizer_share 0.25 after a clipped backward: the CPU steps three quarters, and the
// GPU's quarter crosses PCIe each way (up: bf16 gradients, bf16 weights, the compact record of int16
// residual, int8 m, v and their fp32 block scales; down: the weights and the record).
TEST(PlanTime, TheGpuShareMovesItsStateOverPcieAndOffTheCpu) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 4, "bf16": {"enabled": true}, "gradient_clipping": 1.0,
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"master_weights": "compact", "optimizer_state_dtype": "int8", "offload_grad_dtype": "bf16",
                   "gpu_optimizer_share": 0.25, "data": {"seq_len": 16}}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  const double n = static_cast<double>(kLlama135bParams);
  const auto shared = static_cast<int64_t>(0.25 * n);
  const double record = 4.0 * shared + 8.0 * static_cast<double>((shared + 255) / 256);
  // The compact master (4 B) and bf16 gradient read, int8 m, v with a 4-byte scale a 256-element
  // block read and written: 14.0625 B a parameter of the CPU's three quarters at 10 GB/s.
  EXPECT_DOUBLE_EQ(term(*p, "cpu adam").seconds, 14.0625 * (n - static_cast<double>(shared)) / 10e9);
  EXPECT_DOUBLE_EQ(term(*p, "pcie h2d").seconds, (2 * n + 4.0 * shared + record) / 10e9);
  EXPECT_DOUBLE_EQ(term(*p, "pcie d2h").seconds, (2 * n + 2.0 * shared + record) / 10e9);
}

// 1.35B at stage 3 with the optimizer on NVMe in sub-groups of `sub_group` and `buffers` buffers.
DsConfig nvme_optimizer_config(const char* sub_group, int buffers) {
  return testing::config_from(std::string(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
      "sub_group_size": )") + sub_group + R"(, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp",
      "buffer_count": )" + std::to_string(buffers) + "}}}");
}

// The state of the sub-groups beyond the buffer_count the buffers keep is read and written once.
TEST(PlanTime, OptimizerOnNvmeReadsAndWritesTheStateTheBuffersDoNotKeep) {
  Result<Plan> p = plan_training(testing::llama_1_35b(), nvme_optimizer_config("1e8", 4), testing::round_machine());
  ASSERT_OK(p);
  const double state = 12.0 * (kLlama135bParams - 4e8);
  EXPECT_DOUBLE_EQ(term(*p, "nvme").seconds, state / 1e9 + state / 2e9);
  const double gpu = term(*p, "gpu compute").seconds;  // the backward waits for the NVMe-bound step
  EXPECT_DOUBLE_EQ(p->step_seconds, std::max(0.25 * gpu, state / 1e9 + state / 2e9) + 0.75 * gpu);
}

// Stepping inside the backward (no clipping, a window of micro-batches), every pass runs back to
// front, so the buffers keep nothing for the next: every streamed record is read and written; with
// clipping the step follows the backward, alternates, and keeps buffer_count records.
TEST(PlanTime, OptimizerOnNvmeInsideTheBackwardMovesEveryStreamedRecord) {
  const std::string config = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "sub_group_size": 1e8,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp", "buffer_count": 4}},
      "tierzero": {"data": {"seq_len": 16}}, "gradient_clipping": )";
  const double n = static_cast<double>(kLlama135bParams);
  Result<Plan> inside = plan_training(testing::llama_1_35b(), testing::config_from(config + "0.0}"),
                                      testing::round_machine());
  ASSERT_OK(inside);
  EXPECT_DOUBLE_EQ(term(*inside, "nvme").seconds, 12 * n / 1e9 + 12 * n / 2e9);
  const double gpu = term(*inside, "gpu compute").seconds;  // the forward, then the backward beside the step
  EXPECT_DOUBLE_EQ(inside->step_seconds, 0.25 * gpu + std::max(0.75 * gpu, 12 * n / 1e9 + 12 * n / 2e9));
  Result<Plan> after = plan_training(testing::llama_1_35b(), testing::config_from(config + "1.0}"),
                                     testing::round_machine());
  ASSERT_OK(after);
  const double state = 12.0 * (n - 4e8);
  EXPECT_DOUBLE_EQ(term(*after, "nvme").seconds, state / 1e9 + state / 2e9);
}

// Parameters on NVMe (ZeRO-Infinity): with the optimizer step running into a window of 4 forwards
// run unit by unit (and so do the backwards: window_pass.h), a step reads the shard once for the
// forwards and once for the backwards, less the
// sub-groups max_in_cpu keeps in memory (5 of 1e8 here), and writes it once; H2D carries every gather.
TEST(PlanTime, ParametersOnNvmeAreReadOnceForTheWindowsForwardsAndOnceForItsBackwards) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 1,
      "gradient_accumulation_steps": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
      "sub_group_size": 1e8, "stage3_max_reuse_distance": 0, "offload_optimizer": {"device": "cpu"},
      "offload_param": {"device": "nvme", "nvme_path": "/tmp", "max_in_cpu": 5e8}},
      "tierzero": {"data": {"seq_len": 16}}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  const double n = static_cast<double>(kLlama135bParams), on_disk = n - 5e8;
  EXPECT_DOUBLE_EQ(term(*p, "nvme").seconds, 2 * on_disk * (1 + 1) / 1e9 + 2 * on_disk / 2e9);
  EXPECT_DOUBLE_EQ(term(*p, "pcie h2d").seconds, (2 * n + 2 * n * (1 + 1)) / 10e9);
  EXPECT_DOUBLE_EQ(term(*p, "pcie d2h").seconds, 4 * n / 10e9);  // fp32 sums, once
  // Micro-batch by micro-batch (the window does not fit): once per forward and once per backward.
  DsConfig host = config;
  host.tierzero.offload_grad_accumulator = OffloadGradAccumulator::kHost;
  Machine small = testing::round_machine();
  Result<Plan> q = plan_training(testing::llama_1_35b(), config, small);
  ASSERT_OK(q);
  host.tierzero.gpu_memory_limit = q->gpu_allocated_base_bytes + 1;  // neither the accumulator nor the window
  Result<Plan> r = plan_training(testing::llama_1_35b(), host, small);
  ASSERT_OK(r);
  EXPECT_DOUBLE_EQ(term(*r, "pcie h2d").seconds, (2 * n + 2 * n * (4 + 4)) / 10e9);
  EXPECT_DOUBLE_EQ(term(*r, "pcie d2h").seconds, 4 * 4 * n / 10e9);  // fp32 buckets, every micro-batch
}

// Buffers for every sub-group keep the whole state: nothing moves after the first write.
TEST(PlanTime, OptimizerOnNvmeWithABufferPerSubGroupMovesNothing) {
  Result<Plan> p = plan_training(testing::llama_1_35b(), nvme_optimizer_config("1e9", 2), testing::round_machine());
  ASSERT_OK(p);
  EXPECT_DOUBLE_EQ(term(*p, "nvme").seconds, 0.0);
}

}  // namespace
}  // namespace tierzero::engine
