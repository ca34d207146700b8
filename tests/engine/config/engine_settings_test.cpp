// The ZeRO engine's refusals as engine/config holds them (check_engine_settings, ds_config.h): a
// ds_config the engine cannot honour is refused from its settings alone, with the engine's own
// message, no model read and no engine built; engine_settings() reads what the engine is asked for
// from a config; the int8 moments' sub-group check applies once the partition is known to span
// several sub-groups; the options that have no ds_config key are refused naming the option; the
// gradient ring is refused wherever the optimizer could not step inside the backward; the GPU share
// outside [0, 1), without an offloaded optimizer or without a compact master.
#include <gtest/gtest.h>

#include "engine/config/ds_config.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

Result<DsConfig> parse(const char* json) { return parse_ds_config_text(json, ResolveHints{}); }

TEST(EngineSettings, AStateTheEngineCannotKeepIsRefusedFromTheConfigAlone) {
  // bf16 moments with the optimizer on the GPU: the config's own checks accept it, which the engine
  // used to refuse only once it was being built.
  ASSERT_OK_AND_ASSIGN(const DsConfig on_gpu, parse(R"({"train_batch_size": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 2}, "tierzero": {"optimizer_state_dtype": "bf16"}})"));
  EXPECT_ERROR(check_engine_settings(engine_settings(on_gpu)), ErrorCode::kInvalidArgument,
               "tierzero.optimizer_state_dtype \"bf16\" needs zero_optimization.offload_optimizer.device \"cpu\" or "
               "\"nvme\"");
  ASSERT_OK_AND_ASSIGN(const DsConfig offloaded, parse(R"({"train_batch_size": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"optimizer_state_dtype": "bf16"}})"));
  EXPECT_OK(check_engine_settings(engine_settings(offloaded)));
}

TEST(EngineSettings, ReadsWhatTheConfigAsksOfTheEngine) {
  ASSERT_OK_AND_ASSIGN(const DsConfig config, parse(R"({"train_batch_size": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "sub_group_size": 4096,
                            "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp/a", "buffer_count": 3},
                            "offload_param": {"device": "nvme", "nvme_path": "/tmp/b"}},
      "tierzero": {"optimizer_state_dtype": "int8", "master_weights": "fp32", "offload_grad_dtype": "bf16",
                   "optimizer_records_in_memory": "auto", "pinned_memory_limit": "1GB"}})"));
  const EngineSettings s = engine_settings(config);
  EXPECT_EQ(s.stage, 3);
  EXPECT_EQ(s.compute, ElementType::kBF16);
  EXPECT_TRUE(s.offload_optimizer && s.state_on_nvme && s.offload_params && s.params_on_nvme);
  EXPECT_EQ(s.grad_staging_buffers, 3);
  EXPECT_EQ(s.sub_group_size, 4096);
  EXPECT_EQ(s.state, ElementType::kI8);
  EXPECT_FALSE(s.compact_master);
  EXPECT_EQ(s.offload_grad, ElementType::kBF16);
  EXPECT_FALSE(s.params16_round_away);
  EXPECT_EQ(s.records_in_memory, kOptimizerRecordsAuto);
  EXPECT_EQ(s.pinned_memory_limit, 1'000'000'000u);
  EXPECT_OK(check_engine_settings(s, 1 << 20));
}

TEST(EngineSettings, TheGpuShareNeedsAnOffloadedCompactMasterAndAFractionBelowOne) {
  EngineSettings s{.stage = 3,
                   .compute = ElementType::kBF16,
                   .offload_optimizer = true,
                   .compact_master = true,
                   .gpu_optimizer_share = 0.3};
  EXPECT_OK(check_engine_settings(s));
  s.gpu_optimizer_share = 1.0;
  EXPECT_ERROR(check_engine_settings(s), ErrorCode::kInvalidArgument,
               "tierzero.gpu_optimizer_share 1 must be in [0, 1)");
  s.gpu_optimizer_share = -0.5;
  EXPECT_ERROR(check_engine_settings(s), ErrorCode::kInvalidArgument,
               "tierzero.gpu_optimizer_share -0.5 must be in [0, 1)");
  s.gpu_optimizer_share = 0.3;
  s.compact_master = false;
  EXPECT_ERROR(check_engine_settings(s), ErrorCode::kInvalidArgument,
               "tierzero.gpu_optimizer_share 0.3 needs tierzero.master_weights \"compact\"");
  s.offload_optimizer = false;
  EXPECT_ERROR(check_engine_settings(s), ErrorCode::kInvalidArgument,
               "tierzero.gpu_optimizer_share 0.3 shares the offloaded optimizer's step with the GPU");
  ASSERT_OK_AND_ASSIGN(const DsConfig config, parse(R"({"train_batch_size": 1, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
      "tierzero": {"master_weights": "compact", "gpu_optimizer_share": 0.25}})"));
  EXPECT_EQ(engine_settings(config).gpu_optimizer_share, 0.25);
}

TEST(EngineSettings, Int8SubGroupsMustBeWholeBlocksOnceThePartitionSpansSeveral) {
  EngineSettings s{.stage = 2, .offload_optimizer = true, .sub_group_size = 3000, .state = ElementType::kI8};
  EXPECT_OK(check_engine_settings(s)) << "partition not known yet";
  EXPECT_OK(check_engine_settings(s, 3000)) << "one sub-group";
  EXPECT_ERROR(check_engine_settings(s, 3001), ErrorCode::kInvalidArgument,
               "zero_optimization.sub_group_size=3000 must be a multiple of 256");
  s.sub_group_size = 2560;
  EXPECT_OK(check_engine_settings(s, 1 << 20));
}

TEST(EngineSettings, OptionsWithoutAConfigKeyAreRefusedNamingTheOption) {
  const EngineSettings away{
      .stage = 2, .compute = ElementType::kF16, .offload_optimizer = true, .params16_round_away = true};
  EXPECT_ERROR(check_engine_settings(away), ErrorCode::kInvalidArgument,
               "ZeroEngineOptions::params16_rounding kNearestAway needs");
  EXPECT_ERROR(check_engine_settings({.stage = 2, .offload_optimizer = true, .grad_staging_buffers = 0}),
               ErrorCode::kInvalidArgument, "grad_staging_buffers=0 must be at least 1");
  EXPECT_ERROR(check_engine_settings({.stage = 2, .offload_optimizer = true, .state = ElementType::kI16}),
               ErrorCode::kInvalidArgument, "tierzero.optimizer_state_dtype i16 is not supported");
}

// The gradient ring needs the optimizer stepping inside the window's backward: every condition the
// config alone decides is refused from it, naming the key, its value and the fix, before any weight
// is drawn or read (the 14B's ring, benchmarks/configs/zero3_14b_compact_64gb_ring.json, with one
// value changed at a time); only the slot count waits for the engine.
TEST(EngineSettings, TheGradientRingIsRefusedFromTheConfigWhereTheOptimizerCannotStepInTheBackward) {
  const auto settings = [](const std::string& top, const std::string& zero) {
    const std::string text = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8, )" + top +
                             R"(, "zero_optimization": {"offload_optimizer": {"device": "cpu"}, )" + zero +
                             R"(}, "tierzero": {"grad_ring_records": 9}})";
    Result<DsConfig> config = parse(text.c_str());
    EXPECT_OK(config) << text;
    return config.ok() ? engine_settings(*config) : EngineSettings{};
  };
  const std::string bf16 = R"("bf16": {"enabled": true}, "gradient_clipping": 0)";
  const EngineSettings ring = settings(bf16, R"("stage": 3)");
  EXPECT_EQ(ring.grad_ring_records, 9);
  EXPECT_EQ(ring.world_size, 1);
  EXPECT_TRUE(ring.overlap_comm) << "overlap_comm defaults to true at stage 3";
  EXPECT_EQ(ring.gradient_clipping, 0.0);
  EXPECT_EQ(ring.gradient_accumulation_steps, 8);
  EXPECT_OK(check_engine_settings(ring));

  const std::string needs =
      "tierzero.grad_ring_records 9 needs the optimizer stepping inside the window's backward, "
      "which needs ";
  const std::string or_zero = ", or set tierzero.grad_ring_records 0 (the whole gradient partition)";
  EXPECT_ERROR(
      check_engine_settings(settings(R"("bf16": {"enabled": true}, "gradient_clipping": 1.0)", R"("stage": 3)")),
      ErrorCode::kInvalidArgument,
      needs +
          "gradient_clipping 0 (it is 1: clipping needs the whole gradient's norm before the first "
          "update): set gradient_clipping 0" +
          or_zero);
  EXPECT_ERROR(check_engine_settings(settings(bf16, R"("stage": 2)")), ErrorCode::kInvalidArgument,
               needs + "zero_optimization.stage 3 (it is 2): set stage 3" + or_zero);
  EXPECT_ERROR(check_engine_settings(settings(bf16, R"("stage": 3, "overlap_comm": false)")),
               ErrorCode::kInvalidArgument,
               needs + "zero_optimization.overlap_comm true (it is false): set it true" + or_zero);
  EXPECT_ERROR(check_engine_settings(settings(R"("fp16": {"enabled": true}, "gradient_clipping": 0)", R"("stage": 3)")),
               ErrorCode::kInvalidArgument, needs + "bf16 or fp32 compute");
  EXPECT_ERROR(
      check_engine_settings(settings(bf16, R"("stage": 3, "offload_param": {"device": "nvme", "nvme_path": "/tmp"})")),
      ErrorCode::kInvalidArgument, needs + "the parameters off NVMe");
  EngineSettings one_micro_batch = ring;
  one_micro_batch.gradient_accumulation_steps = 1;
  EXPECT_ERROR(check_engine_settings(one_micro_batch), ErrorCode::kInvalidArgument,
               needs + "gradient_accumulation_steps >= 2 (it is 1;");
  EngineSettings two_ranks = ring;
  two_ranks.world_size = 2;
  EXPECT_ERROR(check_engine_settings(two_ranks), ErrorCode::kInvalidArgument,
               needs + "one rank (this run has 2): run on one GPU" + or_zero);
  EngineSettings on_gpu = ring;  // an engine's options (the ds_config's own check refuses it when parsed)
  on_gpu.offload_optimizer = false;
  EXPECT_ERROR(check_engine_settings(on_gpu), ErrorCode::kInvalidArgument,
               "tierzero.grad_ring_records 9 holds the offloaded optimizer's host gradients");
}

}  // namespace
}  // namespace tierzero::engine
