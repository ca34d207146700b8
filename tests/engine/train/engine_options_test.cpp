// ds_config -> ZeroEngineOptions: every key the engine takes arrives, and what it cannot do is
// refused by name.
#include <gtest/gtest.h>

#include "engine/train/internal/engine_options.h"

namespace tierzero::engine::trainer {
namespace {

DsConfig parse(const char* text) {
  Result<DsConfig> config = parse_ds_config_text(text, ResolveHints{.world_size = 1});
  EXPECT_TRUE(config.ok()) << config.status().to_string();
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
      "tierzero": {"cpu_threads": 3, "grad_accum_dtype": "bf16"}})");
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
}

TEST(EngineOptions, DefaultsAreFp32WithoutOffload) {
  ZeroEngineOptions options = engine_options(parse(R"({"train_batch_size": 1})")).value();
  EXPECT_EQ(options.partition.stage, 0);
  EXPECT_EQ(options.partition.compute_dtype, at::kFloat);
  EXPECT_EQ(options.partition.grad_dtype, at::kFloat);
  EXPECT_FALSE(options.offload_optimizer);
  EXPECT_FALSE(options.partition.offload_params);
}

TEST(EngineOptions, RefuseWhatTheEngineCannotDo) {
  struct Case {
    const char* config;
    const char* key;
  } cases[] = {
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
          "offload_optimizer": {"device": "nvme", "nvme_path": "/tmp"}}})",
       "zero_optimization.offload_optimizer.device"},
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
          "offload_param": {"device": "nvme", "nvme_path": "/tmp"}}})",
       "zero_optimization.offload_param.device"},
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
          "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})",
       "zero_optimization.offload_optimizer.ratio"},
  };
  for (const Case& c : cases) {
    Result<ZeroEngineOptions> options = engine_options(parse(c.config));
    ASSERT_FALSE(options.ok()) << c.key;
    EXPECT_EQ(options.status().code(), ErrorCode::kUnsupported) << c.key;
    EXPECT_NE(options.status().message().find(c.key), std::string::npos) << options.status().to_string();
  }
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
