// ds_config parsing: DeepSpeed's defaults, the batch triad, "auto", warnings and round-trips (unknown keys:
// unknown_keys_test.cpp; the HF Trainer's "auto": hf_auto_test.cpp).
#include <gtest/gtest.h>

#include "engine/config/ds_config.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

DsConfig parse(const char* text, ResolveHints hints = {}) {
  Result<DsConfig> r = parse_ds_config_text(text, hints);
  EXPECT_OK(r);
  return r.ok() ? std::move(r).value() : DsConfig{};
}

TEST(DsConfig, DeepSpeedDefaults) {
  DsConfig c = parse(R"({"train_batch_size": 8})");
  EXPECT_EQ(c.precision(), Precision::kFp32);
  const LossScalerConfig& ls = c.fp16.loss_scaler;
  EXPECT_EQ(ls.static_scale, 0.0);
  EXPECT_EQ(ls.initial_scale_power, 16);
  EXPECT_EQ(ls.scale_window, 1000);
  EXPECT_EQ(ls.hysteresis, 2);
  EXPECT_FALSE(ls.consecutive_hysteresis);
  EXPECT_EQ(ls.min_scale, 1.0);
  const ZeroConfig& z = c.zero;
  EXPECT_EQ(z.stage, 0);
  EXPECT_EQ(z.reduce_bucket_size, 500'000'000u);
  EXPECT_EQ(z.allgather_bucket_size, 500'000'000u);
  EXPECT_FALSE(z.overlap_comm);
  EXPECT_TRUE(z.contiguous_gradients);
  EXPECT_EQ(z.sub_group_size, 1'000'000'000u);
  EXPECT_EQ(z.prefetch_bucket_size, 50'000'000u);
  EXPECT_EQ(z.param_persistence_threshold, 100'000u);
  EXPECT_EQ(z.max_live_parameters, 1'000'000'000u);
  EXPECT_EQ(z.max_reuse_distance, 1'000'000'000u);
  EXPECT_FALSE(z.gather_16bit_weights_on_model_save);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::kNone);
  EXPECT_EQ(z.offload_param.buffer_count, 5);
  EXPECT_EQ(z.offload_param.buffer_size, 100'000'000u);
  EXPECT_EQ(z.offload_param.max_in_cpu, 1'000'000'000u);
  EXPECT_FALSE(z.offload_param.pin_memory);
  EXPECT_EQ(z.offload_optimizer.buffer_count, 4);
  EXPECT_EQ(z.offload_optimizer.ratio, 1.0);
  EXPECT_EQ(c.aio.block_size, 1048576u);
  EXPECT_EQ(c.aio.queue_depth, 8u);
  EXPECT_EQ(c.aio.intra_op_parallelism, 1u);
  EXPECT_FALSE(c.aio.single_submit);
  EXPECT_TRUE(c.aio.overlap_events);
  EXPECT_TRUE(c.optimizer_from_flags);  // no optimizer section: the HF Trainer's AdamW (train needs --lr)
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdamW);
  EXPECT_EQ(c.optimizer.beta1, 0.9);
  EXPECT_EQ(c.optimizer.beta2, 0.999);
  EXPECT_EQ(c.optimizer.eps, 1e-8);
  EXPECT_TRUE(c.optimizer.decoupled_weight_decay());
  EXPECT_FALSE(c.scheduler.has_value());
  EXPECT_EQ(c.gradient_clipping, 1.0);  // DeepSpeed 0.19: GRADIENT_CLIPPING_DEFAULT = 1.0
  EXPECT_EQ(c.steps_per_print, 10);
  EXPECT_FALSE(c.wall_clock_breakdown);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
}

TEST(DsConfig, OverlapCommDefaultsOnForStage3Only) {
  EXPECT_TRUE(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3}})").zero.overlap_comm);
  EXPECT_FALSE(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2}})").zero.overlap_comm);
  EXPECT_FALSE(
      parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "overlap_comm": false}})").zero.overlap_comm);
}

struct TriadCase {
  const char* json;
  int world;
  int64_t train, micro, accum;
};

TEST(DsConfig, BatchTriadDerivationFollowsDeepSpeed) {
  const TriadCase cases[] = {
      {R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4})", 2, 32, 4, 4},
      {R"({"train_batch_size": 32, "gradient_accumulation_steps": 2})", 4, 32, 4, 2},
      {R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 5})", 2, 30, 3, 5},
      {R"({"train_batch_size": 16})", 4, 16, 4, 1},
      {R"({"train_micro_batch_size_per_gpu": 2})", 8, 16, 2, 1},
      {R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 4})", 2, 24, 3,
       4},
      {R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2})", 3, 12,
       2, 2},
      {R"({"train_batch_size": "64", "train_micro_batch_size_per_gpu": 8.0})", 1, 64, 8, 8},
  };
  for (const TriadCase& t : cases) {
    DsConfig c = parse(t.json, ResolveHints{.world_size = t.world});
    EXPECT_EQ(c.batch.train_batch_size, t.train) << t.json;
    EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, t.micro) << t.json;
    EXPECT_EQ(c.batch.gradient_accumulation_steps, t.accum) << t.json;
    EXPECT_EQ(c.batch.world_size, t.world);
  }
}

TEST(DsConfig, AllAutoBatchSizesComeFromTheFlags) {
  const char* text = R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto"})";
  ResolveHints hints;
  hints.world_size = 2;
  hints.flags.micro_batch_size = 4;
  hints.flags.gradient_accumulation_steps = 3;
  DsConfig c = parse(text, hints);
  EXPECT_EQ(c.batch.train_batch_size, 24);
  EXPECT_EQ(c.batch.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.batch.gradient_accumulation_steps, 3);
  hints.flags.gradient_accumulation_steps.reset();  // not DeepSpeed's 1: refused, naming the flag
  EXPECT_ERROR(parse_ds_config_text(text, hints), ErrorCode::kInvalidArgument, "--grad-accum");

  EXPECT_ERROR(parse_ds_config_text(text, ResolveHints{}), ErrorCode::kInvalidArgument,
               "train_micro_batch_size_per_gpu is \"auto\": pass --micro-batch");
}

TEST(DsConfig, NumbersMayBeStrings) {
  DsConfig c = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "reduce_bucket_size": "2e8",
      "allgather_bucket_size": 3e8}, "aio": {"block_size": "1MiB"}, "optimizer": {"type": "adamw",
      "params": {"lr": "3e-4", "weight_decay": 0.1}}, "tierzero": {"gpu_memory_limit": "24GB"}})");
  EXPECT_EQ(c.zero.reduce_bucket_size, 200'000'000u);
  EXPECT_EQ(c.zero.allgather_bucket_size, 300'000'000u);
  EXPECT_EQ(c.aio.block_size, 1048576u);
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdamW);
  EXPECT_EQ(c.optimizer.lr, 3e-4);
  EXPECT_EQ(c.tierzero.gpu_memory_limit, 24'000'000'000u);
}

TEST(DsConfig, AutoBucketSizesComeFromTheHiddenSize) {
  const char* text = R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}})";
  DsConfig c = parse(text, ResolveHints{.model = {.hidden_size = 4096}});
  EXPECT_EQ(c.zero.reduce_bucket_size, 4096u * 4096u);
  EXPECT_EQ(c.zero.prefetch_bucket_size, static_cast<uint64_t>(0.9 * 4096 * 4096));
  EXPECT_EQ(c.zero.param_persistence_threshold, 40960u);
  EXPECT_ERROR(parse_ds_config_text(text, ResolveHints{}), ErrorCode::kInvalidArgument,
               "zero_optimization.reduce_bucket_size is \"auto\", which comes from the model's hidden_size");
}

TEST(DsConfig, AutoSchedulerAndOptimizerValues) {
  const char* text = R"({"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": 2e-4}},
      "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
      "warmup_num_steps": "auto", "total_num_steps": "auto"}}})";
  DsConfig c = parse(text, ResolveHints{.total_steps = 500, .flags = {.warmup_steps = 25}});
  ASSERT_TRUE(c.scheduler.has_value());
  EXPECT_EQ(c.scheduler->warmup_max_lr, 2e-4);
  EXPECT_EQ(c.scheduler->warmup_min_lr, 0.0);
  EXPECT_EQ(c.scheduler->warmup_num_steps, 25);
  EXPECT_EQ(c.scheduler->total_num_steps, 500);

  EXPECT_ERROR(parse_ds_config_text(text, ResolveHints{.flags = {.warmup_steps = 25}}), ErrorCode::kInvalidArgument,
               "scheduler.params.total_num_steps is \"auto\": WarmupDecayLR needs the schedule's length; pass --steps");
}

TEST(DsConfig, SchedulerDefaultsFollowTheClasses) {
  DsConfig warmup = parse(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": 5e-4}},
      "scheduler": {"type": "WarmupLR", "params": {}}})");
  EXPECT_EQ(warmup.scheduler->warmup_max_lr, 5e-4);  // WarmupLR: the optimizer lr
  EXPECT_EQ(warmup.scheduler->warmup_num_steps, 1000);
  EXPECT_EQ(warmup.scheduler->warmup_type, WarmupType::kLog);
  DsConfig decay = parse(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": 5e-4}},
      "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 10}}})");
  EXPECT_EQ(decay.scheduler->warmup_max_lr, 1e-3);  // WarmupDecayLR: its own default 0.001
  DsConfig cosine = parse(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": 5e-4}},
      "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 10000}}})");
  EXPECT_EQ(cosine.scheduler->base_lr, 5e-4);
  EXPECT_EQ(cosine.scheduler->cos_min_ratio, 1e-4);
  EXPECT_EQ(cosine.scheduler->warmup_min_ratio, 0.0);
}

TEST(DsConfig, Stage3AliasesAndDeprecatedKeys) {
  DsConfig c = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "prefetch_bucket_size": 7,
      "max_live_parameters": 9, "stage3_gather_fp16_weights_on_model_save": true, "cpu_offload": true},
      "bfloat16": {"enabled": true}, "aio": {"thread_count": 3}})");
  EXPECT_EQ(c.zero.prefetch_bucket_size, 7u);
  EXPECT_EQ(c.zero.max_live_parameters, 9u);
  EXPECT_TRUE(c.zero.gather_16bit_weights_on_model_save);
  EXPECT_EQ(c.zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(c.precision(), Precision::kBf16);
  EXPECT_EQ(c.aio.intra_op_parallelism, 3u);
  ASSERT_EQ(c.warnings.size(), 1u);  // aio.thread_count is honoured (offload_optimizer.device "nvme")
  EXPECT_NE(c.warnings[0].find("cpu_offload"), std::string::npos);
}

TEST(DsConfig, ResolvedJsonRoundTrips) {
  DsConfig c = parse(R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 3,
      "fp16": {"enabled": true, "loss_scale": 0, "hysteresis": 3}, "zero_optimization": {"stage": 3,
      "offload_param": {"device": "nvme", "nvme_path": "/nvme"}, "offload_optimizer": {"device": "cpu",
      "pin_memory": true, "ratio": 0.5}}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4,
      "betas": [0.9, 0.95]}}, "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 100,
      "warmup_num_steps": 10, "warmup_type": "linear"}}, "gradient_clipping": 1.0,
      "tierzero": {"cpu_threads": 4, "grad_accum_dtype": "bf16", "checkpoint": {"compression": "zstd", "level": 5},
      "data": {"path": "x.u16", "seq_len": 64}}})",
                     ResolveHints{.world_size = 2});
  const nlohmann::json resolved = to_json(c);
  EXPECT_EQ(resolved["train_batch_size"], 12);
  EXPECT_EQ(resolved["zero_optimization"]["stage3_prefetch_bucket_size"], 50'000'000);
  DsConfig again = parse(resolved.dump().c_str(), ResolveHints{.world_size = 2});
  EXPECT_TRUE(again.warnings.empty()) << again.warnings.front();
  EXPECT_EQ(to_json(again), resolved);
  EXPECT_EQ(nlohmann::json::parse(resolved_config_text(c)), resolved);
}

TEST(DsConfig, NvmePathIsADirectoryOrAListOfThem) {
  DsConfig one = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme0"}}})");
  EXPECT_EQ(one.zero.offload_optimizer.nvme_paths, (std::vector<std::string>{"/nvme0"}));
  EXPECT_EQ(to_json(one)["zero_optimization"]["offload_optimizer"]["nvme_path"], "/nvme0");  // DeepSpeed's form
  DsConfig striped = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": ["/nvme0", "/nvme1"]},
      "offload_param": {"device": "nvme", "nvme_path": ["/nvme2"]}}})");
  EXPECT_EQ(striped.zero.offload_optimizer.nvme_paths, (std::vector<std::string>{"/nvme0", "/nvme1"}));
  EXPECT_EQ(striped.zero.offload_param.nvme_paths, (std::vector<std::string>{"/nvme2"}));
  const nlohmann::json resolved = to_json(striped);
  EXPECT_EQ(resolved["zero_optimization"]["offload_optimizer"]["nvme_path"], nlohmann::json({"/nvme0", "/nvme1"}));
  EXPECT_EQ(resolved["zero_optimization"]["offload_param"]["nvme_path"], "/nvme2");
  EXPECT_EQ(to_json(parse(resolved.dump().c_str())), resolved);
  DsConfig none = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu", "nvme_path": null}}})");
  EXPECT_TRUE(none.zero.offload_optimizer.nvme_paths.empty());
  EXPECT_TRUE(to_json(none)["zero_optimization"]["offload_optimizer"]["nvme_path"].is_null());
}

TEST(DsConfig, OptimizerStateDtype) {
  EXPECT_EQ(parse(R"({"train_batch_size": 1})").tierzero.optimizer_state_dtype, OptimizerStateDtype::kFp32);
  DsConfig bf16 = parse(R"({"train_batch_size": 1, "tierzero": {"optimizer_state_dtype": "bf16"}})");
  EXPECT_EQ(bf16.tierzero.optimizer_state_dtype, OptimizerStateDtype::kBf16);
  EXPECT_EQ(to_json(bf16)["tierzero"]["optimizer_state_dtype"], "bf16");
}

// The compact state layout's keys (tierzero.master_weights, optimizer_state_dtype "int8",
// offload_grad_dtype, optimizer_records_in_memory): parsed, defaulted, round-tripped.
TEST(DsConfig, CompactStateLayoutKeys) {
  const DsConfig defaults = parse(R"({"train_batch_size": 1})");
  EXPECT_EQ(defaults.tierzero.master_weights, MasterWeights::kFp32);
  EXPECT_EQ(defaults.tierzero.offload_grad_dtype, OffloadGradDtype::kFp32);
  EXPECT_EQ(defaults.tierzero.optimizer_records_in_memory, 0);
  const nlohmann::json plain = to_json(defaults)["tierzero"];
  EXPECT_EQ(plain["master_weights"], "fp32");
  EXPECT_EQ(plain["offload_grad_dtype"], "fp32");
  EXPECT_EQ(plain["optimizer_records_in_memory"], 0);

  const char* compact = R"({"train_batch_size": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}, "offload_param": {"device": "cpu"}},
      "tierzero": {"pinned_memory_limit": "100GB", "master_weights": "compact", "optimizer_state_dtype": "int8",
      "offload_grad_dtype": "bf16", "optimizer_records_in_memory": "auto"}})";
  const DsConfig c = parse(compact);
  EXPECT_TRUE(c.warnings.empty()) << c.warnings.front();
  EXPECT_EQ(c.tierzero.master_weights, MasterWeights::kCompact);
  EXPECT_EQ(c.tierzero.optimizer_state_dtype, OptimizerStateDtype::kInt8);
  EXPECT_EQ(c.tierzero.offload_grad_dtype, OffloadGradDtype::kBf16);
  EXPECT_EQ(c.tierzero.optimizer_records_in_memory, kOptimizerRecordsAuto);
  const nlohmann::json resolved = to_json(c);
  EXPECT_EQ(resolved["tierzero"]["master_weights"], "compact");
  EXPECT_EQ(resolved["tierzero"]["optimizer_state_dtype"], "int8");
  EXPECT_EQ(resolved["tierzero"]["offload_grad_dtype"], "bf16");
  EXPECT_EQ(resolved["tierzero"]["optimizer_records_in_memory"], "auto");
  const DsConfig again = parse(resolved.dump().c_str());
  EXPECT_EQ(to_json(again), resolved);
  EXPECT_EQ(again.tierzero.optimizer_records_in_memory, kOptimizerRecordsAuto);

  // A record count, as a number or a numeric string; without a pinned limit.
  const DsConfig counted = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"}}, "tierzero": {"optimizer_records_in_memory": 12}})");
  EXPECT_EQ(counted.tierzero.optimizer_records_in_memory, 12);
  EXPECT_EQ(to_json(counted)["tierzero"]["optimizer_records_in_memory"], 12);
  EXPECT_EQ(to_json(parse(to_json(counted).dump().c_str())), to_json(counted));
  EXPECT_EQ(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device":
      "nvme", "nvme_path": "/nvme"}}, "tierzero": {"optimizer_records_in_memory": "7"}})")
                .tierzero.optimizer_records_in_memory,
            7);
  // int8 moments and bf16 host gradients need no bf16 compute, only the offloaded optimizer.
  const DsConfig cpu = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer":
      {"device": "cpu"}}, "tierzero": {"optimizer_state_dtype": "int8", "offload_grad_dtype": "bf16"}})");
  EXPECT_EQ(cpu.tierzero.optimizer_state_dtype, OptimizerStateDtype::kInt8);
  EXPECT_EQ(cpu.tierzero.offload_grad_dtype, OffloadGradDtype::kBf16);
}

TEST(DsConfig, LossScalerConfigFollowsPrecision) {
  DsConfig fp16 = parse(R"({"train_batch_size": 1, "fp16": {"enabled": true, "initial_scale_power": 12}})");
  EXPECT_EQ(fp16.loss_scaler_config().initial_scale_power, 12);
  EXPECT_EQ(fp16.loss_scaler_config().static_scale, 0.0);
  DsConfig bf16 = parse(R"({"train_batch_size": 1, "bf16": {"enabled": true}})");
  EXPECT_EQ(bf16.loss_scaler_config().static_scale, 1.0);
}

}  // namespace
}  // namespace tierzero::engine
