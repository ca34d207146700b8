// ds_config -> ZeroEngineOptions: every key the engine takes arrives, and what it cannot do is
// refused by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/train/internal/engine_options.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine::trainer {
namespace {

DsConfig parse(const char* text) {
  Result<DsConfig> config = parse_ds_config_text(text, ResolveHints{.world_size = 1});
  EXPECT_OK(config);
  return config.ok() ? *config : DsConfig{};
}

TEST(EngineOptions, CarryTheConfig) {
  DsConfig config = parse(R"({"train_batch_size": 4, "bf16": {"enabled": true}, "gradient_clipping": 0.5,
      "zero_optimization": {"stage": 3, "reduce_bucket_size": 1000, "stage3_prefetch_bucket_size": 2000,
        "stage3_param_persistence_threshold": 30, "stage3_max_live_parameters": 4000,
        "stage3_max_reuse_distance": 5000, "offload_optimizer": {"device": "cpu"},
        "offload_param": {"device": "cpu", "pin_memory": true}},
      "optimizer": {"type": "Adam", "params": {"lr": 1e-4, "betas": [0.8, 0.9], "eps": 1e-6,
        "weight_decay": 0.1, "adam_w_mode": false, "bias_correction": false}},
      "tierzero": {"cpu_threads": 3, "grad_accum_dtype": "bf16", "pinned_memory_limit": "2GB",
        "gpu_memory_limit": 1000}, "wall_clock_breakdown": true})");
  ZeroEngineOptions options = engine_options(config).value();
  EXPECT_EQ(options.partition.stage, 3);
  EXPECT_EQ(options.partition.compute_dtype, at::kBFloat16);
  EXPECT_EQ(options.partition.grad_dtype, at::kBFloat16);
  EXPECT_EQ(options.partition.reduce_bucket_numel, 1000);
  EXPECT_EQ(options.partition.prefetch_numel, 2000);
  EXPECT_EQ(options.partition.persistence_threshold, 30);
  EXPECT_EQ(options.partition.max_live_numel, 4000);
  EXPECT_EQ(options.partition.max_reuse_distance, 5000);
  EXPECT_TRUE(options.partition.offload_params);
  EXPECT_TRUE(options.partition.pin_offloaded_params);
  EXPECT_TRUE(options.offload_optimizer);
  EXPECT_EQ(options.cpu_threads, 3);
  EXPECT_EQ(options.gradient_clipping, 0.5);
  EXPECT_EQ(options.adam.beta1, 0.8);
  EXPECT_EQ(options.adam.beta2, 0.9);
  EXPECT_EQ(options.adam.eps, 1e-6);
  EXPECT_EQ(options.adam.weight_decay, 0.1);
  EXPECT_FALSE(options.adam.decoupled_weight_decay);
  EXPECT_FALSE(options.adam.bias_correction);
  EXPECT_EQ(options.sub_group_size, 1'000'000'000);
  EXPECT_TRUE(options.overlap_offload) << "overlap_comm defaults to true at stage 3";
  EXPECT_EQ(options.grad_staging_buffers, 4) << "offload_optimizer.buffer_count's default";
  EXPECT_EQ(options.pinned_memory_limit_bytes, 2'000'000'000u);
  EXPECT_EQ(options.gpu_memory_limit_bytes, 1000u);
  EXPECT_TRUE(options.time_breakdown);
}

TEST(EngineOptions, GradAccumulatorAndWindowArrive) {
  const auto options_for = [](const std::string& tierzero) {
    const std::string text = R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2,
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "tierzero": {)" +
                             tierzero + "}}";
    return engine_options(parse(text.c_str())).value();
  };
  const ZeroEngineOptions defaults = options_for("");
  EXPECT_EQ(defaults.grad_accumulator, GradAccumulator::kAuto);
  EXPECT_EQ(defaults.gradient_accumulation_steps, 4) << "8 samples / (2 per micro-batch x 1 rank)";
  EXPECT_EQ(options_for(R"("offload_grad_accumulator": "device")").grad_accumulator, GradAccumulator::kDevice);
  EXPECT_EQ(options_for(R"("offload_grad_accumulator": "host")").grad_accumulator, GradAccumulator::kHost);
}

TEST(EngineOptions, DefaultsAreFp32WithoutOffload) {
  ZeroEngineOptions options = engine_options(parse(R"({"train_batch_size": 1})")).value();
  EXPECT_EQ(options.partition.stage, 0);
  EXPECT_EQ(options.partition.compute_dtype, at::kFloat);
  EXPECT_EQ(options.partition.grad_dtype, at::kFloat);
  EXPECT_FALSE(options.offload_optimizer);
  EXPECT_FALSE(options.partition.offload_params);
  EXPECT_FALSE(options.overlap_offload) << "overlap_comm defaults to false below stage 3";
  EXPECT_FALSE(options.time_breakdown);
}

TEST(EngineOptions, OptimizerOnNvmeCarriesPathBuffersPipelineAndAio) {
  ZeroEngineOptions options = engine_options(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/mnt/nvme0", "buffer_count": 6,
        "pipeline_read": true, "pipeline_write": false}},
      "aio": {"block_size": 262144, "queue_depth": 32, "intra_op_parallelism": 2}})"))
                                  .value();
  EXPECT_TRUE(options.offload_optimizer);
  EXPECT_EQ(options.nvme_optimizer.paths, std::vector<std::string>{"/mnt/nvme0"});
  EXPECT_EQ(options.nvme_optimizer.buffer_count, 6);
  EXPECT_TRUE(options.nvme_optimizer.pipeline_read);
  EXPECT_FALSE(options.nvme_optimizer.pipeline_write);
  EXPECT_EQ(options.nvme_optimizer.io.block_size, 262144u);
  EXPECT_EQ(options.nvme_optimizer.io.queue_depth, 32u);
  EXPECT_EQ(options.nvme_optimizer.io.intra_op_parallelism, 2u);
  EXPECT_TRUE(engine_options(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
      "offload_optimizer": {"device": "cpu"}}})"))
                  .value()
                  .nvme_optimizer.paths.empty());
}

TEST(EngineOptions, NvmePathListStripesAndStateDtypeReachesTheEngine) {
  ZeroEngineOptions options = engine_options(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
      "offload_optimizer": {"device": "nvme", "nvme_path": ["/mnt/nvme0", "/mnt/nvme1"]}},
      "tierzero": {"optimizer_state_dtype": "bf16"}})"))
                                  .value();
  EXPECT_EQ(options.nvme_optimizer.paths, (std::vector<std::string>{"/mnt/nvme0", "/mnt/nvme1"}));
  EXPECT_EQ(options.optimizer_state_dtype, at::kBFloat16);
  EXPECT_EQ(engine_options(parse(R"({"train_batch_size": 1})")).value().optimizer_state_dtype, at::kFloat);
}

TEST(EngineOptions, RefuseWhatTheEngineCannotDo) {
  struct Case {
    const char* config;
    const char* key;
  } cases[] = {
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
          "offload_param": {"device": "nvme", "nvme_path": "/tmp"}}})",
       "zero_optimization.offload_param.device"},
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
          "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})",
       "zero_optimization.offload_optimizer.ratio"},
  };
  for (const Case& c : cases) {
    EXPECT_ERROR(engine_options(parse(c.config)), ErrorCode::kUnsupported, c.key);
  }
}

// A state option the engine cannot honour is refused with the engine's message (engine/config's
// check_engine_settings) as the options are made, before an engine is built.
TEST(EngineOptions, RefuseAStateTheEngineCannotKeepBeforeAnEngineIsBuilt) {
  EXPECT_ERROR(engine_options(parse(R"({"train_batch_size": 1, "bf16": {"enabled": true},
                   "zero_optimization": {"stage": 2}, "tierzero": {"optimizer_state_dtype": "bf16"}})")),
               ErrorCode::kInvalidArgument,
               "tierzero.optimizer_state_dtype \"bf16\" needs zero_optimization.offload_optimizer.device");
}

TEST(EngineOptions, CompressionLevelOnlyWithZstd) {
  EXPECT_EQ(checkpoint_compression_level(parse(R"({"train_batch_size": 1, "tierzero": {"checkpoint":
      {"level": 9}}})")),
            0);
  EXPECT_EQ(checkpoint_compression_level(parse(R"({"train_batch_size": 1, "tierzero": {"checkpoint":
      {"compression": "zstd", "level": 9}}})")),
            9);
}

}  // namespace
}  // namespace tierzero::engine::trainer
