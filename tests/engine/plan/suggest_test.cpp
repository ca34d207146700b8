// suggest_layout (`tierzero estimate --suggest`): the fastest layout that fits, the host budget spent
// on the optimizer's records, checked against plans computed by hand from the documented bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "engine/plan/internal/model_params.h"
#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

const char* kBase = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
    "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "tierzero": {"data": {"seq_len": 2048}}})";

Machine machine_with(uint64_t gpu, uint64_t host, uint64_t nvme) {
  Machine m = testing::round_machine();
  m.gpu_memory_bytes = gpu;
  m.host_memory_bytes = host;
  m.nvme_bytes = nvme;
  return m;
}

std::string tried_text(const Suggestion& s) {
  std::string text;
  for (const SuggestionTried& t : s.tried) text += t.layout + " " + std::to_string(t.step_seconds) + " " + t.over + "\n";
  return text;
}

double term(const Plan& plan, const std::string& what) {
  for (const TimeTerm& t : plan.time_terms)
    if (t.what == what) return t.seconds;
  return -1;
}

// The 1.35B (P = 1,345,423,360 elements, one rank: the partition is P) on an 11 GiB host, a 24 GB GPU
// and NVMe: only the compact master with int8 moments on NVMe leaves the host room, so it is chosen,
// its records of 1e8 elements kept in memory as the host allows. By hand:
//   pageable peak  1 GiB runtime + the 64 MiB fp32 piece the weights are drawn into at start-up
//   pinned limit   11 GiB - that = 10,670,309,376 B (a whole number of MiB)
//   a record       1e8 x 4 B + 2 x 4 B x 1e8 / 256 = 403,125,000 B
//   pinned besides 16-bit weights 2P + bf16 gradients 2P + N staging slots of 64 MiB + N swap buffers
//                  of a record: N = 4 (the config's): 7,262,628,896 B, floor(3,407,680,480 /
//                  403,125,000) = 8 records in memory, 4 kept by the buffers, 2 moved; N = 2:
//                  6,322,161,168 B, 10 records in memory, 2 kept, 2 moved: the same traffic, so the
//                  config's count stays. Moved: record 12 and the last of 45,423,360 elements (4 B
//                  each + 8 B per 256) = 586,237,920 B each way.
TEST(SuggestLayout, SpendsTheHostOnRecordsAsComputedByHand) {
  const DsConfig base = testing::config_from(kBase);
  const Machine machine = machine_with(24'000'000'000, 11 * kGiB, 100'000'000'000);
  Result<Suggestion> s = suggest_layout(testing::llama_1_35b(), base, machine, {}, {"/nvme"});
  ASSERT_OK(s);
  const DsConfig& c = s->config;
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.zero.offload_optimizer.device, OffloadDevice::kNvme) << tried_text(*s);
  EXPECT_EQ(c.zero.offload_optimizer.nvme_paths, std::vector<std::string>{"/nvme"});
  EXPECT_EQ(c.zero.sub_group_size, 100'000'000u);
  EXPECT_EQ(c.tierzero.master_weights, MasterWeights::kCompact);
  EXPECT_EQ(c.tierzero.optimizer_state_dtype, OptimizerStateDtype::kInt8);
  EXPECT_EQ(c.tierzero.offload_grad_dtype, OffloadGradDtype::kBf16);
  EXPECT_EQ(c.tierzero.optimizer_records_in_memory, kOptimizerRecordsAuto);

  constexpr uint64_t kPageable = (1ull << 30) + (64ull << 20);
  constexpr uint64_t kLimit = 11 * kGiB - kPageable;
  EXPECT_EQ(c.tierzero.pinned_memory_limit, kLimit);
  constexpr int64_t P = testing::kLlama135bParams;
  constexpr int64_t kRecord = 100'000'000 * 4 + 2 * 4 * ((100'000'000 + 255) / 256);
  constexpr int64_t kBesides = 2 * P + 2 * P + 4 * (64 << 20) + 4 * kRecord;
  EXPECT_EQ(c.zero.offload_optimizer.buffer_count, 4) << tried_text(*s);
  EXPECT_EQ(s->plan.optimizer_records, 14);
  EXPECT_EQ(s->plan.optimizer_records_in_memory, (static_cast<int64_t>(kLimit) - kBesides) / kRecord);
  EXPECT_EQ(s->plan.optimizer_records_in_memory, 8);
  constexpr int64_t kLast = P - 13 * 100'000'000;
  constexpr double kMoved = 1.0 * kRecord + 4.0 * kLast + 8.0 * ((kLast + 255) / 256);
  EXPECT_EQ(kMoved, 586'237'920.0);
  EXPECT_DOUBLE_EQ(term(s->plan, "nvme"), kMoved / 1e9 + kMoved / 2e9);  // round_machine: 1 GB/s read, 2 write
  EXPECT_TRUE(s->plan.feasible()) << format_plan(s->plan, {});
  EXPECT_LE(testing::check(s->plan, "host").peak_bytes, 11 * kGiB);

  // The rule: nothing that fits is faster (by more than the 1% that counts as equal).
  const SuggestionTried& chosen = s->tried[s->chosen];
  EXPECT_TRUE(chosen.over.empty());
  EXPECT_DOUBLE_EQ(chosen.step_seconds, s->plan.step_seconds);
  for (const SuggestionTried& t : s->tried) {
    if (t.over.empty()) {
      EXPECT_GE(t.step_seconds * 1.01, chosen.step_seconds) << t.layout;
    }
  }
}

// On a 6.75 GiB host the weights cannot stay beside the bf16 gradients (the compact layouts on NVMe
// need 6,322,161,168 B pinned even with 2 swap buffers, over the 6,106,906,624 B left beside the
// pageable peak of 1 GiB + 64 MiB), so they go to NVMe with an fp32 master (the engine refuses the compact one there), and the
// host left is spent on weights first: offload_param.max_in_cpu = (left - the other pinned buffers) /
// 2 B, by hand: bf16 gradients 2P + 2 staging slots of 64 MiB + 2 swap buffers of a record (1e8 x
// (4 + 1 + 1) B + 8 B x 390,625 scales = 603,125,000 B) + 5 parameter read buffers of 1e8 x 2 B
// (rounded up to 4096, + 2 x 4096: 200,011,776 B) + 2 parameter write windows of a sub-group (2 x 2e8
// B) = 5,431,373,328 B (4 swap buffers: 6,771,841,056 B, over).
TEST(SuggestLayout, WeightsOnNvmeTakeTheHostFirst) {
  const DsConfig base = testing::config_from(kBase);
  const Machine machine = machine_with(24'000'000'000, 27 * kGiB / 4, 100'000'000'000);
  Result<Suggestion> s = suggest_layout(testing::llama_1_35b(), base, machine, {}, {"/nvme"});
  ASSERT_OK(s);
  const DsConfig& c = s->config;
  EXPECT_EQ(c.zero.offload_param.device, OffloadDevice::kNvme) << tried_text(*s);
  EXPECT_EQ(c.zero.offload_param.nvme_paths, std::vector<std::string>{"/nvme"});
  EXPECT_EQ(c.zero.offload_optimizer.device, OffloadDevice::kNvme);
  EXPECT_EQ(c.tierzero.master_weights, MasterWeights::kFp32);
  EXPECT_EQ(c.tierzero.optimizer_state_dtype, OptimizerStateDtype::kInt8);
  constexpr int64_t P = testing::kLlama135bParams;
  constexpr int64_t kLeft = 27 * (int64_t{1} << 30) / 4 - ((int64_t{1} << 30) + (int64_t{64} << 20));
  EXPECT_EQ(kLeft, 6'106'906'624);
  constexpr int64_t kOthers = 2 * P + 2 * (64 << 20) + 2 * int64_t{603'125'000} + 5 * 200'011'776 + 2 * 200'000'000;
  EXPECT_EQ(kOthers, 5'431'373'328);
  EXPECT_EQ(c.zero.offload_optimizer.buffer_count, 2);
  // Within the pools' page rounding (a few KiB).
  EXPECT_NEAR(double(c.zero.offload_param.max_in_cpu), double(kLeft - kOthers) / 2, 16384.0);
  EXPECT_EQ(s->plan.optimizer_records_in_memory, 0);  // what the weights leave holds no record
  EXPECT_TRUE(s->plan.feasible()) << format_plan(s->plan, {});
}

// With room everywhere the GPU holds it all: the first layout tried (nothing offloaded, fp32 state).
TEST(SuggestLayout, NothingOffloadedWhenTheGpuHoldsIt) {
  const Machine machine = machine_with(141'000'000'000, 512 * kGiB, 0);
  Result<Suggestion> s = suggest_layout(testing::llama_1_35b(), testing::config_from(kBase), machine, {}, {});
  ASSERT_OK(s);
  EXPECT_EQ(s->chosen, 0u) << tried_text(*s);
  EXPECT_EQ(s->config.zero.offload_optimizer.device, OffloadDevice::kNone);
  EXPECT_EQ(s->config.zero.offload_param.device, OffloadDevice::kNone);
  EXPECT_TRUE(s->plan.feasible());
}

// A 24 GB GPU cannot hold the 1.35B's 20 B/param; on a large host whose CPU Adam and PCIe are fast
// enough to hide behind the GPU's compute every CPU layout steps alike, so the least lossy is
// chosen: fp32 state.
TEST(SuggestLayout, LeastLossyOfEqualSteps) {
  Machine machine = machine_with(24'000'000'000, 512 * kGiB, 0);
  machine.adam_gbps = machine.h2d_gbps = machine.d2h_gbps = {1000, "test"};
  Result<Suggestion> s = suggest_layout(testing::llama_1_35b(), testing::config_from(kBase), machine, {}, {});
  ASSERT_OK(s);
  EXPECT_FALSE(s->tried[0].over.empty()) << tried_text(*s);  // the GPU-only layout is over the GPU
  EXPECT_EQ(s->config.zero.offload_optimizer.device, OffloadDevice::kCpu) << tried_text(*s);
  EXPECT_EQ(s->config.tierzero.master_weights, MasterWeights::kFp32);
  EXPECT_EQ(s->config.tierzero.optimizer_state_dtype, OptimizerStateDtype::kFp32);
  EXPECT_EQ(s->config.tierzero.offload_grad_dtype, OffloadGradDtype::kFp32);
  EXPECT_TRUE(s->plan.feasible());
}

// Where the CPU Adam paces the step, its bytes do: the compact master with int8 moments and bf16
// gradients moves 14.06 B a parameter against fp32's 30, and is chosen for the shorter step.
TEST(SuggestLayout, FewerOptimizerBytesWhereTheCpuAdamPaces) {
  const Machine machine = machine_with(24'000'000'000, 512 * kGiB, 0);  // the CPU Adam at 10 GB/s
  Result<Suggestion> s = suggest_layout(testing::llama_1_35b(), testing::config_from(kBase), machine, {}, {});
  ASSERT_OK(s);
  EXPECT_EQ(s->config.zero.offload_optimizer.device, OffloadDevice::kCpu) << tried_text(*s);
  EXPECT_EQ(s->config.tierzero.master_weights, MasterWeights::kCompact) << tried_text(*s);
  EXPECT_EQ(s->config.tierzero.optimizer_state_dtype, OptimizerStateDtype::kInt8) << tried_text(*s);
  EXPECT_EQ(s->config.tierzero.offload_grad_dtype, OffloadGradDtype::kBf16) << tried_text(*s);
  EXPECT_NEAR(term(s->plan, "cpu adam"), 14.0625 * static_cast<double>(testing::kLlama135bParams) / 10e9, 1e-9);
  EXPECT_TRUE(s->plan.feasible());
}

// Without an NVMe directory no NVMe layout is tried (and a note says so); on an 8 GiB host none of
// the others fits, so the least over (the largest peak / budget the smallest) is returned with its
// problems: the GPU-only layout, its 28.03 GiB over the 22.35 GiB GPU by 25%, where the most compact
// CPU layout is over the host's pinned room by 74% (10.31 GiB of 5.94: 8 GiB less the 2.06 GiB
// pageable peak).
TEST(SuggestLayout, WithoutNvmeNothingFitsAndTheLeastOverIsReturned) {
  const Machine machine = machine_with(24'000'000'000, 8 * kGiB, 0);
  Result<Suggestion> s = suggest_layout(testing::llama_1_35b(), testing::config_from(kBase), machine, {}, {});
  ASSERT_OK(s);
  for (const SuggestionTried& t : s->tried) EXPECT_EQ(t.layout.find("nvme"), std::string::npos) << t.layout;
  ASSERT_EQ(s->notes.size(), 1u);
  EXPECT_NE(s->notes[0].find("--nvme DIR"), std::string::npos) << s->notes[0];
  EXPECT_FALSE(s->plan.feasible());
  EXPECT_FALSE(s->plan.problems.empty());
  EXPECT_EQ(s->chosen, 0u) << tried_text(*s);
  EXPECT_EQ(s->config.zero.offload_optimizer.device, OffloadDevice::kNone);
  const TierCheck& gpu = testing::check(s->plan, "gpu");
  EXPECT_NEAR(double(gpu.peak_bytes) / double(gpu.budget_bytes), 1.25, 0.01);
}

// The gradient ring's fewest slots on a model small enough to lay out by hand: vocab 10, hidden 4,
// intermediate 8, one layer of one head (norm 4, q, k, v, o 16 each, norm 4, gate, up, down 32 each:
// 168), records of 16 elements. Untied: the embedding [0, 40) on records 0-2, the layer [40, 208) on
// 2-12 (11), the norm and head [208, 252) on 13-15: 11. Tied: the head is the embedding, whose
// records 0-2 stay held from the head's landing until unit 0's, beside the layer's 2-12: 13.
TEST(SuggestLayout, GradientRingSlotsAreTheRecordsTheBackwardHoldsAtOnce) {
  ModelDims m{.vocab_size = 10,
              .hidden_size = 4,
              .intermediate_size = 8,
              .num_hidden_layers = 1,
              .num_attention_heads = 1,
              .num_key_value_heads = 1,
              .head_dim = 4};
  EXPECT_EQ(plan::grad_ring_slots(m, 16), 11);
  m.tie_word_embeddings = true;
  EXPECT_EQ(plan::grad_ring_slots(m, 16), 13);
  EXPECT_EQ(plan::grad_ring_slots(m, 1000), 1);  // one record holds it all
}

// benchmarks/configs/zero3_14b_compact_64gb.json (gradient_clipping 0) on the Qwen2.5-14B shape, a 24 GB
// GPU, a 64 GiB host and 55 GiB of NVMe, the reference box's figures (what docs/configs.md's table runs).
struct Qwen14bOn64GiB {
  ModelDims model;
  DsConfig base;
  Machine machine = default_machine();
};
Qwen14bOn64GiB qwen14b_on_64gib() {
  const char* root_env = std::getenv("TIERZERO_SOURCE_DIR");
  const std::filesystem::path root(root_env ? root_env : ".");
  Qwen14bOn64GiB out;
  out.model = load_model_dims((root / "benchmarks/models/qwen2.5_14b.json").string()).value();
  ResolveHints hints;
  hints.model.hidden_size = out.model.hidden_size;
  out.base = load_ds_config((root / "benchmarks/configs/zero3_14b_compact_64gb.json").string(), hints).value();
  out.machine.gpu_memory_bytes = 24'000'000'000;
  out.machine.host_memory_bytes = 64 * kGiB;
  out.machine.nvme_bytes = 55 * kGiB;
  return out;
}

bool has_ring(const SuggestionTried& t) { return t.layout.find("gradient ring") != std::string::npos; }

// With clipping off the host need not hold the 27.5 GiB bf16 gradient partition: the ring's slots
// free it for the optimizer's records, so the ring is chosen, faster than every layout that fits with
// the whole partition, and a note says so. Its slots by hand: the LM head unit (the final norm, 5,120,
// and the head, 152,064 x 5,120 = 778,567,680 elements) is the last of P = 14,770,033,664, elements
// [13,991,460,864, P): records 139 to 147 of 1e8, 9 (a decoder layer, 275,268,608 elements, spans at most 4).
TEST(SuggestLayout, The14bOnA64GiBHostTakesTheGradientRingWithoutClipping) {
  const Qwen14bOn64GiB run = qwen14b_on_64gib();
  ASSERT_EQ(run.base.gradient_clipping, 0.0);
  Result<Suggestion> s = suggest_layout(run.model, run.base, run.machine, {}, {});
  ASSERT_OK(s);
  EXPECT_EQ(parameter_count(run.model), 14'770'033'664);
  EXPECT_EQ(s->config.tierzero.grad_ring_records, 9) << tried_text(*s);
  EXPECT_EQ(s->config.zero.offload_optimizer.device, OffloadDevice::kNvme);
  EXPECT_EQ(s->config.zero.sub_group_size, 100'000'000u);
  EXPECT_NE(s->tried[s->chosen].layout.find("; gradient ring of 9 records"), std::string::npos) << tried_text(*s);
  EXPECT_TRUE(s->plan.feasible()) << format_plan(s->plan, {});
  EXPECT_LE(testing::check(s->plan, "host").peak_bytes, 64 * kGiB);
  double without = 0;  // the fastest that fits with the whole gradient partition
  for (const SuggestionTried& t : s->tried)
    if (!has_ring(t) && t.over.empty() && (without == 0 || t.step_seconds < without)) without = t.step_seconds;
  ASSERT_GT(without, 0) << tried_text(*s);
  EXPECT_LT(s->plan.step_seconds * 1.01, without) << tried_text(*s);
  char figures[64];
  std::snprintf(figures, sizeof figures, "%.1f s a step against %.1f s", s->plan.step_seconds, without);
  const auto note = std::find_if(s->notes.begin(), s->notes.end(), [](const std::string& n) {
    return n.find("the gradient ring (tierzero.grad_ring_records 9,") != std::string::npos;
  });
  ASSERT_NE(note, s->notes.end()) << "no note on the ring";
  EXPECT_NE(note->find(figures), std::string::npos) << *note;
  // The config it writes is one the engine accepts, and plans the same.
  EXPECT_OK(check_engine_settings(engine_settings(s->config)));
}

// With clipping on the engine refuses the ring, so no ring layout is tried or chosen, and a note
// says what it would need and what it would predict: the step chosen above, with clipping 0.
TEST(SuggestLayout, WithClippingTheRingIsNotChosenAndANoteSaysWhy) {
  Qwen14bOn64GiB run = qwen14b_on_64gib();
  const Result<Suggestion> unclipped = suggest_layout(run.model, run.base, run.machine, {}, {});
  ASSERT_OK(unclipped);
  run.base.gradient_clipping = 1.0;
  Result<Suggestion> s = suggest_layout(run.model, run.base, run.machine, {}, {});
  ASSERT_OK(s);
  EXPECT_EQ(s->config.tierzero.grad_ring_records, 0);
  for (const SuggestionTried& t : s->tried) EXPECT_FALSE(has_ring(t)) << t.layout;
  EXPECT_GT(s->plan.step_seconds, unclipped->plan.step_seconds * 1.01);
  char figures[64];
  std::snprintf(figures, sizeof figures, "would predict %.1f s a step (chosen: %.1f s)", unclipped->plan.step_seconds,
                s->plan.step_seconds);
  const auto note = std::find_if(s->notes.begin(), s->notes.end(), [](const std::string& n) {
    return n.find("the gradient ring would need gradient_clipping 0 (this config: 1)") != std::string::npos;
  });
  ASSERT_NE(note, s->notes.end()) << "no note on the ring";
  EXPECT_NE(note->find(figures), std::string::npos) << *note;
  EXPECT_NE(note->find("gradient ring of 9 records"), std::string::npos) << *note;
}

// A gradient ring whose window does not fit the GPU would be refused by the engine at the first
// step, after the weights are drawn: the plan (which `train` runs before) names it. The 14B's ring
// (9 slots) with micro-batches of 1 x 2048 tokens fits beside 24 GB; with 2 per micro-batch the
// window doubles to 7 x 50 units x 4096 tokens x 5120 x 2 B = 14.7 GB, which does not.
TEST(SuggestLayout, APlannedRingWhoseWindowDoesNotFitIsAProblem) {
  Qwen14bOn64GiB run = qwen14b_on_64gib();
  run.base.tierzero.grad_ring_records = 9;
  const auto ring_problem = [](const Plan& p) {
    return std::any_of(p.problems.begin(), p.problems.end(), [](const std::string& problem) {
      return problem.find(
                 "tierzero.grad_ring_records 9 needs the optimizer stepping inside the backward of a "
                 "window") != std::string::npos;
    });
  };
  Result<Plan> fits = plan_training(run.model, run.base, run.machine);
  ASSERT_OK(fits);
  EXPECT_FALSE(ring_problem(*fits)) << format_plan(*fits, {});
  run.base.batch.train_micro_batch_size_per_gpu = 2;
  Result<Plan> over = plan_training(run.model, run.base, run.machine);
  ASSERT_OK(over);
  EXPECT_TRUE(ring_problem(*over)) << format_plan(*over, {});
  run.base.gradient_clipping = 1.0;  // refused by check_engine_settings, which names it instead
  Result<Plan> refused = plan_training(run.model, run.base, run.machine);
  ASSERT_OK(refused);
  EXPECT_FALSE(ring_problem(*refused));
}

}  // namespace
}  // namespace tierzero::engine
