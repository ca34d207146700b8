// Bytes per tier against figures computed by hand from the engine's rules (plan.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

using testing::check;
using testing::config_from;
using testing::item_bytes;
using testing::kLlama135bParams;

constexpr int64_t N = kLlama135bParams;
constexpr int64_t kSlots = 1 + 24 * 9 + 1 + 1;           // embedding, 9 per layer, final norm, LM head
constexpr int64_t kNorms = 24 * 2 + 1;                   // the parameters under the persistence threshold
constexpr int64_t kLargestUnit = 2048 + 32000LL * 2048;  // final norm + LM head

Plan plan_of(const std::string& json, int world = 1, PlanOptions options = {}) {
  Result<Plan> p = plan_training(testing::llama_1_35b(), config_from(json, world), testing::round_machine(), options);
  EXPECT_OK(p);
  return p.ok() ? *p : Plan{};
}

TEST(PlanMemory, ParameterCountByHand) {
  EXPECT_EQ(parameter_count(testing::llama_1_35b()), N);
  ModelDims tied = testing::llama_1_35b();
  tied.tie_word_embeddings = true;
  EXPECT_EQ(parameter_count(tied), N - 32000LL * 2048);
}

TEST(PlanMemory, Stage3OptimizerOnCpu) {
  const Plan p = plan_of(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"data": {"seq_len": 16}}})");
  EXPECT_EQ(p.parameters, N);
  // Host: 12 B/param of optimizer state, 4 B/param of fp32 gradients, 2 B/param of 16-bit weights,
  // offload_optimizer.buffer_count (4) staging slots of the largest landed bucket (reduce_bucket_size
  // / W + one element per slot, fp32: 2 GB), each capped at the engine's 64 MiB slot.
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "optimizer state (fp32 master, m, v)"), 12u * N);
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "gradient partition (fp32 accumulation)"), 4u * N);
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "16-bit weights bound for the GPU"), 2u * N);
  const uint64_t staging = 4 * (64u << 20);
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "gradient staging slots"), staging);
  EXPECT_EQ(check(p, "pinned").peak_bytes, 18u * N + staging);
  // GPU: the 16-bit shard (W = 1: the whole model) and the norms kept whole; no optimizer state.
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "parameter shard"), 2u * N);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "persistent small parameters, whole"), 2u * kNorms * 2048);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "optimizer state (fp32 master, m, v)"), 0u);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "gradient partition"), 0u);
  // Host peak: pinned + the runtime + start-up's 64 MiB fp32 piece of the weights.
  EXPECT_EQ(check(p, "host").peak_bytes, 18u * N + staging + (1ull << 30) + (64ull << 20));
}

// Periodic saves: the write-behind buffers (checkpoint/storage's WriteBuffers, 16 MiB each, at least
// 4) as tierzero.checkpoint.write_behind asks; "auto" the rank's checkpoint (fp32 master + m + v:
// 12 B x the partition, here the whole model); none without tierzero.checkpoint.save_every.
TEST(PlanMemory, CheckpointWriteBehindBuffers) {
  const auto with = [](const std::string& checkpoint) {
    return plan_of(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
        "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
        "tierzero": {"data": {"seq_len": 16}, "checkpoint": )" + checkpoint + "}}");
  };
  const std::string what = "checkpoint write-behind buffers (periodic saves)";
  constexpr uint64_t kBuffer = 16u << 20;
  EXPECT_EQ(item_bytes(with(R"({})"), Tier::kPageable, what), 0u);
  EXPECT_EQ(item_bytes(with(R"({"save_every": 2, "write_behind": 0})"), Tier::kPageable, what), 4 * kBuffer);
  EXPECT_EQ(item_bytes(with(R"({"save_every": 2, "write_behind": "1GiB"})"), Tier::kPageable, what), 64 * kBuffer);
  EXPECT_EQ(item_bytes(with(R"({"save_every": 2, "write_behind": 1073741825})"), Tier::kPageable, what),
            65 * kBuffer);
  const Plan automatic = with(R"({"save_every": 2})");
  EXPECT_EQ(item_bytes(automatic, Tier::kPageable, what), (12u * N + kBuffer - 1) / kBuffer * kBuffer);
  EXPECT_EQ(check(automatic, "host").peak_bytes,
            check(with(R"({})"), "host").peak_bytes + item_bytes(automatic, Tier::kPageable, what));
}

// What the weight source holds at start-up (param_loading.cpp, random_param_source.cpp,
// param_source.cpp): a 64 MiB fp32 piece, into which a random draw writes each range and a
// checkpoint's reads convert, plus a 2 MiB read buffer a core for the checkpoint; never a whole
// parameter, never the whole model.
TEST(PlanMemory, StartUpHoldsOnePieceAndTheReadBuffers) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"data": {"seq_len": 16}}})";
  const Plan random = plan_of(json);
  const Plan from_checkpoint = plan_of(json, 1, PlanOptions{.weights_from_checkpoint = true});
  const uint64_t piece = 64ull << 20;
  EXPECT_EQ(item_bytes(random, Tier::kPageable, "random weights drawn at start-up"), piece);
  const uint64_t read = piece + std::max(1u, std::thread::hardware_concurrency()) * (2ull << 20);
  EXPECT_EQ(item_bytes(from_checkpoint, Tier::kPageable, "weights read from safetensors at start-up"), read);
  EXPECT_EQ(check(from_checkpoint, "host").peak_bytes, check(random, "host").peak_bytes - piece + read);
  EXPECT_EQ(check(from_checkpoint, "pinned").peak_bytes, check(random, "pinned").peak_bytes);
}

TEST(PlanMemory, Stage0OnTheGpu) {
  const Plan p = plan_of(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "tierzero": {"data": {"seq_len": 16}}})");
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "parameters (compute copy, whole model)"), 2u * N);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "gradient partition"), 4u * N);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "optimizer state (fp32 master, m, v)"), 12u * N);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "optimizer step temporaries (fp32 gradient)"), 4u * N);
  // Three buckets of 5e8 fp32 elements would exceed the model: the whole model's gradient.
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "reduce buckets"), 4u * N);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "one unit's parameter gradients"), 2u * kLargestUnit);
  // 25 unit inputs of [1 x 16 x 2048] bf16 plus 16 token ids; the LM head's 4 fp32 [16 x 32000].
  const uint64_t inputs = 16 * (25 * 2048 * 2 + 8);
  const uint64_t logits = 16ull * 32000 * 16;
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "activations: unit inputs kept"), inputs);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "activations: LM head recomputed (logits, loss)"), logits);
  const uint64_t backward = inputs + logits + 4u * N + 2u * kLargestUnit;
  EXPECT_EQ(p.gpu_allocated_peak_bytes, 18u * N + std::max<uint64_t>(backward, 4u * N));
  EXPECT_EQ(check(p, "gpu").peak_bytes, p.gpu_allocated_peak_bytes + 500'000'000);
  EXPECT_TRUE(p.feasible());  // no budget given
}

TEST(PlanMemory, Stage2PartitionsOverRanks) {
  const Plan p = plan_of(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})",
                         4);
  EXPECT_EQ(p.world_size, 4);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "parameters (compute copy, whole model)"), 2u * N);
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "optimizer state (fp32 master, m, v)"), 12u * (N / 4));
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "gradient partition"), 4u * (N / 4));
}

TEST(PlanMemory, OptimizerOnNvmeAndBf16State) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp"}}})";
  const Plan fp32 = plan_of(json, 2);
  const int64_t shard = N / 2;  // every parameter here has an even element count
  EXPECT_EQ(item_bytes(fp32, Tier::kNvme, "optimizer state (fp32 master, m, v)"), 12u * shard);
  // buffer_count (4) records of a sub-group (> shard: the whole shard), 12 B an element.
  EXPECT_EQ(item_bytes(fp32, Tier::kPinned, "optimizer swap buffers"), 4u * 12 * shard);
  EXPECT_EQ(item_bytes(fp32, Tier::kPinned, "gradient partition (fp32 accumulation)"), 4u * shard);
  EXPECT_EQ(check(fp32, "nvme").peak_bytes, 2u * 12 * shard);  // both ranks of the host
  DsConfig config = config_from(json, 2);
  config.tierzero.optimizer_state_dtype = OptimizerStateDtype::kBf16;
  Result<Plan> bf16 = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(bf16);
  EXPECT_EQ(item_bytes(*bf16, Tier::kNvme, "optimizer state (fp32 master, bf16 m, v)"), 8u * shard);
  EXPECT_EQ(item_bytes(*bf16, Tier::kPinned, "optimizer swap buffers"), 4u * 8 * shard);
  EXPECT_EQ(bf16->optimizer_state, "bf16");
}

TEST(PlanMemory, OffloadedParametersLeaveTheGpu) {
  const Plan p = plan_of(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
      "offload_param": {"device": "cpu", "pin_memory": true}}})");
  EXPECT_EQ(item_bytes(p, Tier::kGpu, "parameter shard"), 0u);
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "parameter shard"), 2u * N);
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "16-bit weights bound for the GPU"), 0u);  // written in place
}

// tierzero.gpu_optimizer_share: two device slots of a chunk (the sub-group, at most 16 Mi elements,
// whole moment blocks), resident, in the GPU's peak; none with share 0.
TEST(PlanMemory, TheGpuShareHoldsTwoSlotsOnTheGpu) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "sub_group_size": 1e8,
      "offload_optimizer": {"device": "cpu"}}, "tierzero": {"master_weights": "compact",
      "optimizer_state_dtype": "int8", "offload_grad_dtype": "bf16", "gpu_optimizer_share": 0.3}})";
  const Plan shared = plan_of(json);
  const uint64_t chunk = 1u << 24;  // below the 1e8 sub-group
  // Per slot: bf16 gradients, bf16 weights, int16 residual, int8 m, uint8 v, two fp32 scales per 256.
  const uint64_t slots = 2 * ((2 + 2 + 2 + 1 + 1) * chunk + 2 * 4 * (chunk / 256));
  const char* const what = "optimizer GPU share: device slots";
  EXPECT_EQ(item_bytes(shared, Tier::kGpu, what), slots);
  DsConfig none = config_from(json);
  none.tierzero.gpu_optimizer_share = 0.0;
  Result<Plan> p = plan_training(testing::llama_1_35b(), none, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(item_bytes(*p, Tier::kGpu, what), 0u);
  EXPECT_EQ(shared.gpu_allocated_base_bytes, p->gpu_allocated_base_bytes + slots);
}

// What the engine adds on the GPU where it finds room (zero_engine.cpp): the fp32 gradient
// accumulator of the partition and, the optimizer step running into the forward, the window
// (window_pass_extra_bytes): the other micro-batches' inputs of every body unit and their output
// gradients, and one unit's fp32 gradient sums. Both are in the peak when they fit the budget,
// neither when the accumulator does not; the base the engine decides against is the same.
TEST(PlanMemory, EngineChoicesAddTheAccumulatorAndTheWindowWhereTheyFit) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"data": {"seq_len": 16}}})";
  const Plan roomy = plan_of(json);
  // 3 other micro-batches x (25 body-unit inputs + an output gradient), bf16; + the LM head unit
  // (final norm + head, the largest) in fp32.
  const uint64_t window = 3ull * 26 * 16 * 2048 * 2 + 4ull * (2048 + 32000 * 2048);
  EXPECT_EQ(item_bytes(roomy, Tier::kGpu, "gradient accumulator (fp32, the partition)"), 4u * N);
  EXPECT_EQ(item_bytes(roomy, Tier::kGpu, "window: other micro-batches' unit inputs, grads"), window);
  // "auto" groups the 4 micro-batches (the next test): their layer's recomputation beyond the head's.
  EXPECT_EQ(roomy.window_group, 4);
  EXPECT_EQ(roomy.gpu_allocated_peak_bytes,
            roomy.gpu_allocated_base_bytes + 4u * N + window +
                item_bytes(roomy, Tier::kGpu, "window: a group's decoder layer recomputed"));
  DsConfig tight = config_from(json);
  tight.tierzero.gpu_memory_limit = roomy.gpu_allocated_base_bytes + 4u * N - 1;  // the accumulator misses
  Result<Plan> p = plan_training(testing::llama_1_35b(), tight, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(item_bytes(*p, Tier::kGpu, "gradient accumulator (fp32, the partition)"), 0u);
  EXPECT_EQ(item_bytes(*p, Tier::kGpu, "window: other micro-batches' unit inputs, grads"), window);
  EXPECT_EQ(p->gpu_allocated_base_bytes, roomy.gpu_allocated_base_bytes);
  // Offloaded on one rank the engine cuts gradient buckets at a 64 MiB staging slot and hands each on
  // as it is launched; a larger parameter (the embedding) is its own bucket, its gradient uncopied:
  // one open bucket of 16 Mi fp32 elements.
  EXPECT_EQ(item_bytes(roomy, Tier::kGpu, "reduce buckets"), 64u << 20);
}

// tierzero.window_group (window_pass.h): "auto" takes the largest divisor of the accumulation steps
// whose group fits the GPU budget; a group recomputes its decoder layer over all its micro-batches,
// which the peak holds past the LM head's logits (the head stays one micro-batch at a time).
TEST(PlanMemory, TheWindowGroupIsTheLargestThatFitsAndAddsItsLayerPastTheHead) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"data": {"seq_len": 2048}}})";
  const char* const what = "window: a group's decoder layer recomputed";
  const Plan roomy = plan_of(json);
  EXPECT_EQ(roomy.window_group, 4);
  const uint64_t group = item_bytes(roomy, Tier::kGpu, what);
  EXPECT_GT(group, 0u);
  EXPECT_EQ(roomy.gpu_allocated_peak_bytes,
            roomy.gpu_allocated_base_bytes + 4u * N +
                item_bytes(roomy, Tier::kGpu, "window: other micro-batches' unit inputs, grads") + group);
  // A byte short of that peak: the group of 4 misses, 2 (its layers under the head's logits) fits.
  DsConfig tight = config_from(json);
  tight.tierzero.gpu_memory_limit = roomy.gpu_allocated_peak_bytes - 1;
  Result<Plan> p = plan_training(testing::llama_1_35b(), tight, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(p->window_group, 2);
  EXPECT_EQ(item_bytes(*p, Tier::kGpu, what), 0u);
  // Asked for: taken as it is (the config refuses a group that does not divide the accumulation).
  DsConfig asked = config_from(json);
  asked.tierzero.window_group = 2;
  p = plan_training(testing::llama_1_35b(), asked, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(p->window_group, 2);
  // Without a GPU "auto" is 1: the micro-batch path's bits.
  p = plan_training(testing::llama_1_35b(), config_from(json), testing::round_machine(),
                    PlanOptions{.compute_on_cpu = true});
  ASSERT_OK(p);
  EXPECT_EQ(p->window_group, 1);
}

double gpu_compute_seconds(const Plan& p) {
  for (const TimeTerm& term : p.time_terms)
    if (term.what == "gpu compute") return term.seconds;
  return -1;
}

// tierzero.kept_activations (window_pass.h): "auto" keeps the last layers' graphs that fit the GPU
// budget beside the rest of the plan; each holds every micro-batch's saved intermediates and the
// layer's weights, and saves its recomputation's FLOPs.
TEST(PlanMemory, KeptActivationsHoldTheLastLayersGraphsThatFitAndSaveTheirRecomputation) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"data": {"seq_len": 2048}, "window_group": 1, "kept_activations": "auto"}})";
  const char* const what = "window: kept decoder layers' graphs";
  // By hand, a Llama-1.35B layer per token in bf16 on a GPU: two fused norms' inputs and outputs and
  // their fp32 inverse RMS, q, k, v after RoPE and attention's output, 16 heads' fp32 log-sum-exp, the
  // MLP's gate, silu, up and product; 4 micro-batches of 2048 tokens; the layer's matmul weights (q,
  // k, v, o 2048 x 2048; gate, up, down 2048 x 5504) in bf16.
  const uint64_t per_token = 2 * (2 * 2 * 2048 + 4) + 2 * 4 * 2048 + 4 * 16 + 4 * 2 * 5504;
  const uint64_t weights = 4ull * 2048 * 2048 + 3ull * 2048 * 5504;
  const uint64_t layer = 4 * 2048 * per_token + 2 * weights;
  const Plan roomy = plan_of(json);  // no GPU budget: every layer
  EXPECT_EQ(roomy.kept_layers, 24);
  EXPECT_EQ(item_bytes(roomy, Tier::kGpu, what), 24 * layer);
  // A budget whose 90 % (auto's share: the allocator's fragmentation) is a byte short of that peak:
  // one layer fewer.
  DsConfig tight = config_from(json);
  tight.tierzero.gpu_memory_limit = (roomy.gpu_allocated_peak_bytes - 1) / 9 * 10 + 9;
  Result<Plan> p = plan_training(testing::llama_1_35b(), tight, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(p->kept_layers, 23);
  EXPECT_EQ(item_bytes(*p, Tier::kGpu, what), 23 * layer);
  // Each kept layer saves its forward's FLOPs: 2 x its matmul weights + 4 x 2048 (heads x head_dim) x
  // 2048 (seq) per token, over 4 x 2048 tokens at 100 TFLOPS.
  DsConfig none = config_from(json);
  none.tierzero.kept_activations = 0;
  p = plan_training(testing::llama_1_35b(), none, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(p->kept_layers, 0);
  EXPECT_EQ(item_bytes(*p, Tier::kGpu, what), 0u);
  const double saved = 24.0 * 4 * 2048 * (2.0 * static_cast<double>(weights) + 4.0 * 2048 * 2048) / 100e12;
  EXPECT_NEAR(gpu_compute_seconds(*p) - gpu_compute_seconds(roomy), saved, 1e-9);
  // Asked for: at most the model's layers; without a GPU "auto" keeps none.
  DsConfig asked = config_from(json);
  asked.tierzero.kept_activations = 30;
  p = plan_training(testing::llama_1_35b(), asked, testing::round_machine());
  ASSERT_OK(p);
  EXPECT_EQ(p->kept_layers, 24);
  p = plan_training(testing::llama_1_35b(), config_from(json), testing::round_machine(),
                    PlanOptions{.compute_on_cpu = true});
  ASSERT_OK(p);
  EXPECT_EQ(p->kept_layers, 0);
}

TEST(PlanMemory, CpuRunHasNoCopyBoundForAGpuNorAGpuBudget) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"gpu_memory_limit": "1MB"}})";
  Result<Plan> gpu = plan_training(testing::llama_1_35b(), config_from(json), testing::round_machine());
  ASSERT_OK(gpu);
  EXPECT_EQ(item_bytes(*gpu, Tier::kPinned, "16-bit weights bound for the GPU"), 2u * N);
  EXPECT_TRUE(check(*gpu, "gpu allocated").over());
  Result<Plan> cpu = plan_training(testing::llama_1_35b(), config_from(json), testing::round_machine(),
                                   PlanOptions{.compute_on_cpu = true});
  ASSERT_OK(cpu);
  EXPECT_EQ(item_bytes(*cpu, Tier::kPinned, "16-bit weights bound for the GPU"), 0u);
  EXPECT_FALSE(check(*cpu, "gpu allocated").over());
  EXPECT_TRUE(cpu->feasible());
}

TEST(PlanMemory, ZeroMicroBatchIsAnError) {
  DsConfig config = config_from(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine(), PlanOptions{.seq_len = 0});
  ASSERT_OK(p);
  config.tierzero.data_seq_len = 0;
  EXPECT_ERROR(plan_training(testing::llama_1_35b(), config, testing::round_machine()), ErrorCode::kInvalidArgument,
               "tierzero.data.seq_len");
}

}  // namespace
}  // namespace tierzero::engine
