// The compact optimizer state in the plan: bytes per tier of each layout against formulas worked by
// hand (not the planner's own functions), the records kept in memory, the NVMe traffic of the
// streamed ones, and the one combined layout the advice suggests. Plus state_layout.h on small numbers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "engine/layout/layout.h"
#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

using testing::check;
using testing::config_from;
using testing::item_bytes;
using testing::kLlama135bParams;

constexpr int64_t N = kLlama135bParams;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Llama 1.35B at stage 3 on one rank, the optimizer offloaded to `device` with the tierzero keys `state`.
Plan plan_with(const std::string& device, const std::string& state, const std::string& zero_extra = "",
               int64_t accumulation = 1) {
  const DsConfig config = config_from(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": )" +
                                      std::to_string(accumulation) + R"(, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, )" + zero_extra + R"("offload_optimizer": {"device": ")" + device +
                                      R"(", "nvme_path": "/tmp"}}, "tierzero": {"data": {"seq_len": 16}, )" + state +
                                      "}}");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  EXPECT_OK(p);
  return p.ok() ? *p : Plan{};
}

const StateBytes& row(const Plan& p, const std::string& what) {
  for (const StateBytes& r : p.state_bytes)
    if (r.what == what) return r;
  ADD_FAILURE() << what;
  return p.state_bytes.front();
}

const TimeTerm& term(const Plan& p, const std::string& what) {
  for (const TimeTerm& t : p.time_terms)
    if (t.what == what) return t;
  ADD_FAILURE() << what;
  return p.time_terms.front();
}

TEST(StateLayoutHeader, RecordBytesAndRecordsInMemory) {
  using namespace state_layout;
  constexpr Layout fp32{}, bf16{.moments = Moments::kBf16};
  constexpr Layout compact8{.compact_master = true, .moments = Moments::kInt8Blockwise};
  static_assert(fp32.record_bytes(10) == 120);
  static_assert(bf16.record_bytes(10) == 80);
  // 1000 elements: a 2 B residual, 1 B m and 1 B v each, and 4 blocks of 256 with an fp32 scale for m and v.
  static_assert(compact8.record_bytes(1000) == 2000 + 2000 + 4 * 2 * 4);
  constexpr Records records{.partition = 1000, .sub_group = 300};
  static_assert(records.count() == 4 && records.numel(3) == 100 && records.group() == 300);
  static_assert(Records{.partition = 1000, .sub_group = 5000}.group() == 1000);
  // A step moves the streamed records beyond the buffers' share (one in memory, two kept by the
  // buffers: only the last, short record, 100 x 12 B).
  EXPECT_EQ(streamed_bytes_per_step(fp32, records, 1, 2), 100 * 12);
  EXPECT_EQ(streamed_bytes_per_step(fp32, records, 0, 1), 2 * 3600 + 1200);
  EXPECT_EQ(streamed_bytes_per_step(fp32, records, 2, 4), 0);
}

// The pinned list and the records kept in memory on small numbers, footprints worked by hand
// (ArenaPool: a block under 80 KiB aligned to bit_floor(bytes / 32) within [16, 256]; the pool a
// whole number of pages).
TEST(StateLayoutHeader, PinnedListRecordsInMemoryAndSwapFiles) {
  using namespace state_layout;
  const HostShape shape{.partition = 1000,
                        .landing = 100,
                        .sub_group_size = 300,
                        .layout = {},
                        .optimizer_offloaded = true,
                        .optimizer_nvme = true,
                        .optimizer_buffers = 2,
                        .staging_slots = 1};
  // Two swap buffers of a 3600-byte record, the records block, 4000 B of fp32 gradients, one slot of
  // 100 fp32 elements, no 16-bit weights bound for a device.
  const std::vector<offload::PinnedBufferSpec> none = pinned_buffers(shape, 0);
  ASSERT_EQ(none.size(), 6u);
  EXPECT_EQ(none[0].bytes, 3600u);
  EXPECT_EQ(none[2].role, offload::PinnedRole::kOptimizerRecords);
  EXPECT_EQ(none[2].bytes, 0u);
  EXPECT_EQ(none[3].bytes, 4000u);
  EXPECT_EQ(none[4].bytes, 400u);
  EXPECT_EQ(pinned_buffers(shape, 3)[2].bytes, 3u * 3600);
  EXPECT_EQ(pinned_buffers(shape, 4)[2].bytes, 3u * 3600 + 1200);  // the short last record: its own bytes
  // 3648 (64-aligned) x 2 + 4032 + 400 = 11728: three pages.
  EXPECT_EQ(offload::pinned_capacity(none), 12288u);
  // N as given, capped at the records there are.
  EXPECT_EQ(records_in_memory(shape, 2, 0), 2);
  EXPECT_EQ(records_in_memory(shape, 9, 0), 4);
  // By budget: 2 records (7200 B, 128-aligned: 7296) make 19024 B, five pages; 3 (10800 B,
  // 256-aligned: 11008) make 22736 B, six pages, and so do all 4 (12000 B, 256-aligned: 12032;
  // 23760 B): the short last record fits beside the third.
  EXPECT_EQ(records_in_memory(shape, kRecordsInMemoryByBudget, 20480), 2);
  EXPECT_EQ(records_in_memory(shape, kRecordsInMemoryByBudget, 24575), 2);
  EXPECT_EQ(records_in_memory(shape, kRecordsInMemoryByBudget, 24576), 4);
  EXPECT_EQ(records_in_memory(shape, kRecordsInMemoryByBudget, 12288), 0);
  EXPECT_EQ(records_in_memory(shape, kRecordsInMemoryByBudget, 0), 0);
  // The gradient ring: two record-sized slots (300 fp32 elements) instead of the 4000 B partition.
  HostShape ring = shape;
  ring.grad_ring_records = 2;
  const std::vector<offload::PinnedBufferSpec> ring_buffers = pinned_buffers(ring, 0);
  ASSERT_EQ(ring_buffers.size(), 7u);
  for (int i : {0, 1}) {
    EXPECT_EQ(ring_buffers[3 + i].role, offload::PinnedRole::kGradients);
    EXPECT_EQ(ring_buffers[3 + i].index, i);
    EXPECT_EQ(ring_buffers[3 + i].bytes, 1200u);
  }
  // By budget, the room the ring frees holds more records: 6000 elements of fp32 gradients (24000 B)
  // against 2 x 1200 B free 21600 B, at least four 3600-byte records after alignment and pages.
  HostShape big = shape;
  big.partition = 6000;
  HostShape big_ring = big;
  big_ring.grad_ring_records = 2;
  const int64_t with_partition = records_in_memory(big, kRecordsInMemoryByBudget, 65536);
  EXPECT_GT(with_partition, 0);
  EXPECT_GE(records_in_memory(big_ring, kRecordsInMemoryByBudget, 65536), with_partition + 4);
  // Swap files: each streamed record's share of a path rounded up to 4096.
  EXPECT_EQ(swap_bytes(shape, 1, 1, 0).optimizer, 3u * 4096);
  EXPECT_EQ(swap_bytes(shape, 1, 2, 0).optimizer, 3u * 4096 * 2);
  EXPECT_EQ(swap_bytes(shape, 4, 1, 0).optimizer, 0u);
  // A staging slot: 4 B x landing, a multiple of 8, at least 8, at most the slot bytes.
  EXPECT_EQ(staging_slot_bytes({.landing = 3}), 8);
  EXPECT_EQ(staging_slot_bytes({.landing = 0}), 8);
  EXPECT_EQ(staging_slot_bytes({.landing = 100, .staging_slot_bytes = 64}), 64);
  // An NVMe parameter read buffer: 2000 B rounded up to 4096, plus 4096 at each end.
  EXPECT_EQ(param_read_buffer_bytes(1000, 2), 3 * 4096);
}

// Optimizer in pinned memory: the state item, the gradient partition and the table per layout.
TEST(PlanStateLayout, BytesPerLayoutInHostMemory) {
  const Plan fp32 = plan_with("cpu", R"("master_weights": "fp32")");
  EXPECT_EQ(item_bytes(fp32, Tier::kPinned, "optimizer state (fp32 master, m, v)"), 12u * N);
  EXPECT_EQ(item_bytes(fp32, Tier::kPinned, "gradient partition (fp32 accumulation)"), 4u * N);
  EXPECT_EQ(fp32.master_weights, "fp32");
  EXPECT_DOUBLE_EQ(row(fp32, "master").pinned, 4.0);
  EXPECT_DOUBLE_EQ(row(fp32, "m, v").pinned, 8.0);

  const Plan compact = plan_with("cpu", R"("master_weights": "compact", "optimizer_state_dtype": "bf16")");
  EXPECT_EQ(item_bytes(compact, Tier::kPinned, "optimizer state (compact master, bf16 m, v)"), 6u * N);
  EXPECT_EQ(compact.master_weights, "compact");
  EXPECT_EQ(compact.optimizer_state, "bf16");

  const Plan lean = plan_with(
      "cpu", R"("master_weights": "compact", "optimizer_state_dtype": "int8", "offload_grad_dtype": "bf16")");
  const uint64_t scales = 2u * 4 * static_cast<uint64_t>(ceil_div(N, 256));  // an fp32 scale per 256, m and v
  EXPECT_EQ(item_bytes(lean, Tier::kPinned, "optimizer state (compact master, int8 m, v)"), 2u * N + 2u * N + scales);
  EXPECT_EQ(item_bytes(lean, Tier::kPinned, "gradient partition (bf16)"), 2u * N);
  EXPECT_EQ(item_bytes(lean, Tier::kPinned, "gradient partition (fp32 accumulation)"), 0u);
  EXPECT_EQ(item_bytes(lean, Tier::kPinned, "16-bit weights bound for the GPU"), 2u * N);  // the master's other half
  EXPECT_EQ(lean.optimizer_state, "int8");
  EXPECT_EQ(lean.offload_grad_dtype, "bf16");
  // The table: B/param of the partition in each tier.
  EXPECT_DOUBLE_EQ(row(lean, "master").pinned, 2.0);
  EXPECT_NEAR(row(lean, "m, v").pinned, 2.0 + 8.0 / 256, 1e-6);
  EXPECT_DOUBLE_EQ(row(lean, "gradients").pinned, 2.0);
  EXPECT_DOUBLE_EQ(row(lean, "16-bit weights").gpu, 2.0);
  EXPECT_DOUBLE_EQ(row(lean, "16-bit weights").pinned, 2.0);
  EXPECT_NEAR(row(lean, "total").pinned, 2 + 2 + 2 + 8.0 / 256 + 2, 1e-6);
  EXPECT_DOUBLE_EQ(row(lean, "total").nvme, 0.0);
  const std::string text = format_plan(lean, {"test"});
  EXPECT_NE(text.find("bytes per parameter"), std::string::npos) << text;
  EXPECT_NE(text.find("state layout: master compact, m + v int8, host gradients bf16"), std::string::npos) << text;
  // The 16 B/param layout against 6 + 1/32: pinned shrinks by the difference (the buffers' bytes; the
  // pool's block alignment and page rounding, which the engine's pool takes too, differ between them).
  const auto listed = [](const Plan& p) {
    return check(p, "pinned").peak_bytes - item_bytes(p, Tier::kPinned, "pinned pool: block alignment, whole pages");
  };
  EXPECT_EQ(listed(fp32) - listed(lean), 12u * N + 4u * N - (4u * N + scales + 2u * N));
}

// Optimizer on NVMe in sub-groups of 1e8 with 3 records kept in memory and 4 swap buffers.
TEST(PlanStateLayout, RecordsInMemoryAndTheStreamedRest) {
  const Plan p = plan_with("nvme",
                           R"("master_weights": "compact", "optimizer_state_dtype": "int8",
      "optimizer_records_in_memory": 3)",
                           R"("sub_group_size": 1e8, )");
  const int64_t record = 100'000'000LL * 4 + ceil_div(100'000'000, 256) * 8;  // residual + codes, scales
  const int64_t count = ceil_div(N, 100'000'000);
  EXPECT_EQ(p.optimizer_records, count);
  EXPECT_EQ(p.optimizer_records_in_memory, 3);
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "optimizer records kept in memory"), static_cast<uint64_t>(3 * record));
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "optimizer swap buffers"), static_cast<uint64_t>(4 * record));
  // The swap file holds each streamed record in whole 4096-byte blocks, as the engine preallocates it
  // (offload::RecordStaging; the plan counted the record's bytes alone before it sized them with
  // engine/layout, short of the file by up to 4095 bytes a record).
  EXPECT_EQ(item_bytes(p, Tier::kNvme, "optimizer state (compact master, int8 m, v)"),
            static_cast<uint64_t>((count - 3) * ceil_div(record, 4096) * 4096));
  // A step reads and writes the records after the 3 in memory and the 4 the buffers keep; the last
  // one is short.
  const int64_t last = N - (count - 1) * 100'000'000LL;
  const double moved = static_cast<double>((count - 1 - 7) * record + 4 * last + ceil_div(last, 256) * 8);
  EXPECT_DOUBLE_EQ(term(p, "nvme").seconds, moved / 1e9 + moved / 2e9);
  EXPECT_NEAR(row(p, "master").pinned, 2.0 * 3 / count, 1e-9);
  EXPECT_NEAR(row(p, "master").nvme, 2.0 * (count - 3) / count, 1e-9);
}

// "auto": as many whole records as the pinned limit leaves beside every other pinned buffer.
TEST(PlanStateLayout, RecordsInMemoryByThePinnedBudget) {
  const std::string zero = R"("sub_group_size": 1e8, )";
  const std::string state = R"("pinned_memory_limit": "16GB", "optimizer_state_dtype": "bf16", )";
  const Plan none = plan_with("nvme", state + R"("optimizer_records_in_memory": 0)", zero);
  const Plan by_budget = plan_with("nvme", state + R"("optimizer_records_in_memory": "auto")", zero);
  const uint64_t record = 100'000'000ull * 8;  // fp32 master + bf16 m, v
  const uint64_t others = check(none, "pinned").peak_bytes;
  const int64_t expected = static_cast<int64_t>((16'000'000'000ull - others) / record);
  ASSERT_GT(expected, 0);
  ASSERT_LT(expected, ceil_div(N, 100'000'000));
  EXPECT_EQ(by_budget.optimizer_records_in_memory, expected);
  // The records' block in whole pages, as the engine's pool takes it (`others` is whole pages).
  EXPECT_EQ(check(by_budget, "pinned").peak_bytes, (others + expected * record + 4095) / 4096 * 4096);
  EXPECT_LE(check(by_budget, "pinned").peak_bytes, 16'000'000'000ull);
  EXPECT_GT(check(by_budget, "pinned").peak_bytes + record, 16'000'000'000ull);
  EXPECT_FALSE(check(by_budget, "pinned").over());
  EXPECT_LT(term(by_budget, "nvme").seconds, term(none, "nvme").seconds);
}

// bf16 host gradients with the window (no GPU budget: it runs): the fp32 sums cross PCIe once a
// step, rounded to bf16; the parameters twice (the forwards' pass and the backwards').
TEST(PlanStateLayout, Bf16GradientsCrossOnceAStep) {
  const Plan p = plan_with("cpu", R"("offload_grad_dtype": "bf16")", R"("offload_param": {"device": "cpu"}, )", 8);
  const double n = static_cast<double>(N);
  EXPECT_DOUBLE_EQ(term(p, "pcie d2h").seconds, 2 * n / 10e9);
  // Updated weights, then every gather twice, less the units kept whole between the passes
  // (stage3_max_reuse_distance 1e9: half of it, 5e8 elements).
  EXPECT_DOUBLE_EQ(term(p, "pcie h2d").seconds, (2 * n + 2 * (2 * n - 5e8)) / 10e9);
}

// Qwen2.5-14B on a 24 GB GPU, 125 GB of host memory and 60 GB of NVMe with the optimizer on NVMe:
// the advice is one combined layout that fits, not one key at a time.
TEST(PlanStateLayout, CombinedSuggestionFor14BOn24GB) {
  Result<ModelDims> model = parse_model_dims(R"({"model_type": "qwen2", "vocab_size": 152064, "hidden_size": 5120,
      "intermediate_size": 13824, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
      "tie_word_embeddings": false})",
                                             "qwen2.5-14b");
  ASSERT_OK(model);
  const DsConfig config = config_from(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "overlap_comm": true, "reduce_bucket_size": 1e8,
      "sub_group_size": 2e8, "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp", "pin_memory": true},
      "offload_param": {"device": "cpu", "pin_memory": true}},
      "tierzero": {"gpu_memory_limit": "24GB", "data": {"seq_len": 2048}}})");
  Machine machine = testing::round_machine();
  machine.gpu_memory_bytes = 24'000'000'000;
  machine.host_memory_bytes = 125'000'000'000;
  machine.nvme_bytes = 60'000'000'000;
  Result<Plan> p = plan_training(*model, config, machine);
  ASSERT_OK(p);
  ASSERT_FALSE(p->feasible());
  std::string all;
  for (const std::string& problem : p->problems) all += problem + "\n";
  size_t lines = 0;
  for (size_t at = all.find("(one layout, together)"); at != std::string::npos;
       at = all.find("(one layout, together)", at + 1))
    ++lines;
  EXPECT_EQ(lines, 1u) << all;
  const size_t line_at = all.find("  - set ", all.find("Change:"));
  const std::string line = all.substr(line_at, all.find('\n', line_at) - line_at);
  // The least lossy layout that fits: here bf16 moments suffice (int8 is not needed).
  for (const char* key : {"tierzero.master_weights \"compact\"", "tierzero.optimizer_state_dtype \"bf16\"",
                          "tierzero.offload_grad_dtype \"bf16\"", "tierzero.optimizer_records_in_memory \"auto\"",
                          "tierzero.pinned_memory_limit \""})
    EXPECT_NE(line.find(key), std::string::npos) << key << "\n" << all;
  EXPECT_NE(line.find("fits every host and NVMe budget"), std::string::npos) << all;
  EXPECT_EQ(all.find("  - set tierzero.optimizer_state_dtype \"bf16\":"), std::string::npos) << all;  // not key by key
  EXPECT_EQ(line.find("int8"), std::string::npos) << all;
}

// benchmarks/configs/zero3_{14b,7b}_compact_24gb.json on their Qwen2.5 shapes: a 24 GB GPU, 125 GiB of
// host memory (the run's RSS at most 120 GiB), at most 55 GiB on NVMe, 16,384 tokens a step.
TEST(PlanStateLayout, CompactBenchmarkConfigsFitTheirBox) {
  const char* root_env = std::getenv("TIERZERO_SOURCE_DIR");
  const std::filesystem::path root(root_env ? root_env : ".");
  for (const char* size : {"14b", "7b"}) {
    SCOPED_TRACE(size);
    Result<ModelDims> model = load_model_dims((root / "benchmarks" / "models" / (std::string("qwen2.5_") + size + ".json")).string());
    ASSERT_OK(model);
    ResolveHints hints;
    hints.model.hidden_size = model->hidden_size;
    Result<DsConfig> config = load_ds_config(
        (root / "benchmarks" / "configs" / (std::string("zero3_") + size + "_compact_24gb.json")).string(), hints);
    ASSERT_OK(config);
    EXPECT_TRUE(config->warnings.empty()) << config->warnings.front();
    Machine machine = testing::round_machine();
    machine.gpu_memory_bytes = 24'000'000'000;
    machine.host_memory_bytes = 125ull << 30;  // the GPU box's total as `free -g` prints it
    machine.nvme_bytes = 64'000'000'000;
    Result<Plan> p = plan_training(*model, *config, machine);
    ASSERT_OK(p);
    EXPECT_TRUE(p->feasible()) << p->problems.front();
    EXPECT_EQ(p->tokens_per_step, 16'384);
    EXPECT_LE(check(*p, "host").peak_bytes, 120ull << 30);
    EXPECT_LE(check(*p, "nvme").peak_bytes, 55ull << 30);
    EXPECT_EQ(p->master_weights, "compact");
    EXPECT_EQ(p->optimizer_state, "int8");
    EXPECT_EQ(p->offload_grad_dtype, "bf16");
    EXPECT_GT(p->optimizer_records_in_memory, 0);
  }
}

// check_engine_settings (engine/config) refuses the gradient ring from the config exactly where
// engine/layout's step_in_backward_refusal, which the planner and the engine decide with, keeps the
// optimizer from stepping inside the backward: over every stage 2 / 3, one or two ranks, the
// parameters on NVMe or not, clipping or not, fp16 or bf16 (an offloaded optimizer, overlap_comm and
// a window of micro-batches given).
TEST(StateLayout, TheConfigRefusesTheGradientRingWhereTheOptimizerCannotStepInTheBackward) {
  for (const int stage : {2, 3})
    for (const int world : {1, 2})
      for (const bool params_nvme : {false, true})
        for (const double clipping : {0.0, 1.0})
          for (const bool fp16 : {false, true}) {
            const EngineSettings s{.stage = stage,
                                   .compute = fp16 ? ElementType::kF16 : ElementType::kBF16,
                                   .offload_optimizer = true,
                                   .offload_params = params_nvme,
                                   .params_on_nvme = params_nvme,
                                   .grad_ring_records = 4,
                                   .world_size = world,
                                   .overlap_comm = true,
                                   .gradient_clipping = clipping,
                                   .gradient_accumulation_steps = 2};
            const char* why_not =
                state_layout::step_in_backward_refusal(stage == 3 && world == 1, params_nvme, clipping, fp16);
            EXPECT_EQ(check_engine_settings(s).ok(), why_not == nullptr)
                << "stage " << stage << ", world " << world << ", params on nvme " << params_nvme << ", clipping "
                << clipping << ", fp16 " << fp16 << ": " << check_engine_settings(s).to_string();
          }
}

}  // namespace
}  // namespace tierzero::engine
