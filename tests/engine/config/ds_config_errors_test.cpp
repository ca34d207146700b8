// One case per class of ds_config error: each must be kInvalidArgument and name the key.
#include <gtest/gtest.h>

#include <string>

#include "engine/config/ds_config.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

struct ErrorCase {
  const char* name;
  const char* json;
  const char* key;  // must appear in the message
  int world_size = 1;
};

// Every case starts from a valid base and breaks one thing.
const ErrorCase kCases[] = {
    {"fp16_and_bf16", R"({"train_batch_size": 1, "fp16": {"enabled": true}, "bf16": {"enabled": true}})",
     "bf16.enabled"},
    {"fp16_and_bfloat16", R"({"train_batch_size": 1, "fp16": {"enabled": true}, "bfloat16": {"enabled": true}})",
     "fp16.enabled"},
    {"triad_mismatch",
     R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 3})",
     "train_batch_size"},
    {"triad_floor_division_mismatch", R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3})",
     "gradient_accumulation_steps"},
    {"triad_nothing_given", R"({"gradient_accumulation_steps": 4})", "train_micro_batch_size_per_gpu"},
    {"triad_derived_zero", R"({"train_batch_size": 4})", "train_micro_batch_size_per_gpu", 8},
    {"triad_negative", R"({"train_batch_size": 8, "gradient_accumulation_steps": -2})", "gradient_accumulation_steps"},
    {"triad_zero_given", R"({"train_micro_batch_size_per_gpu": 0})", "train_micro_batch_size_per_gpu"},
    {"triad_fraction", R"({"train_batch_size": 2.5})", "train_batch_size"},
    {"world_size_zero", R"({"train_batch_size": 1})", "world size", 0},
    {"stage_out_of_range", R"({"train_batch_size": 1, "zero_optimization": {"stage": 4}})", "zero_optimization.stage"},
    {"stage_not_a_number", R"({"train_batch_size": 1, "zero_optimization": {"stage": "three"}})",
     "zero_optimization.stage"},
    {"offload_param_without_stage3",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})",
     "zero_optimization.offload_param"},
    {"offload_optimizer_stage0",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})",
     "zero_optimization.offload_optimizer"},
    {"param_nvme_without_path",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}})",
     "zero_optimization.offload_param.nvme_path"},
    {"optimizer_nvme_without_path",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}})",
     "zero_optimization.offload_optimizer.nvme_path"},
    {"nvme_path_empty_list",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": []}}})",
     "zero_optimization.offload_optimizer.nvme_path is an empty list"},
    {"nvme_path_entry_not_string",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": ["/a", 5]}}})",
     "zero_optimization.offload_param.nvme_path[1] must be a directory"},
    {"nvme_path_entry_empty",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": [""]}}})",
     "zero_optimization.offload_optimizer.nvme_path[0] must be a directory"},
    {"nvme_path_entry_repeated",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": ["/a", "/b", "/a/"]}}})",
     "zero_optimization.offload_optimizer.nvme_path[2] \"/a/\" repeats "
     "zero_optimization.offload_optimizer.nvme_path[0]"},
    {"nvme_path_not_string_or_list",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": {"a": 1}}}})",
     "zero_optimization.offload_optimizer.nvme_path must be a directory (a string) or a list"},
    {"unknown_offload_device",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "gpu"}}})",
     "zero_optimization.offload_param.device"},
    {"partial_offload_not_stage3",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})",
     "zero_optimization.offload_optimizer.ratio"},
    {"ratio_above_one",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 1.5}}})",
     "zero_optimization.offload_optimizer.ratio"},
    {"zero_bucket", R"({"train_batch_size": 1, "zero_optimization": {"reduce_bucket_size": 0}})",
     "zero_optimization.reduce_bucket_size"},
    {"negative_bucket", R"({"train_batch_size": 1, "zero_optimization": {"allgather_bucket_size": "-5e8"}})",
     "zero_optimization.allgather_bucket_size"},
    {"zero_sub_group", R"({"train_batch_size": 1, "zero_optimization": {"sub_group_size": 0}})",
     "zero_optimization.sub_group_size"},
    {"zero_buffer_count",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "buffer_count": 0}}})",
     "zero_optimization.offload_param.buffer_count"},
    {"zero_buffer_size",
     R"({"train_batch_size": 1, "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "buffer_size": 0}}})",
     "zero_optimization.offload_param.buffer_size"},
    {"stage3_key_twice",
     R"({"train_batch_size": 1, "zero_optimization": {"stage3_prefetch_bucket_size": 1, "prefetch_bucket_size": 2}})",
     "zero_optimization.stage3_prefetch_bucket_size"},
    {"bool_as_number", R"({"train_batch_size": 1, "zero_optimization": {"overlap_comm": 1}})",
     "zero_optimization.overlap_comm"},
    {"section_not_object", R"({"train_batch_size": 1, "fp16": 3})", "fp16"},
    {"negative_loss_scale", R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scale": -1}})",
     "fp16.loss_scale"},
    {"zero_hysteresis", R"({"train_batch_size": 1, "fp16": {"enabled": true, "hysteresis": 0}})", "fp16.hysteresis"},
    {"zero_window", R"({"train_batch_size": 1, "fp16": {"loss_scale_window": 0}})", "fp16.loss_scale_window"},
    {"zero_min_scale", R"({"train_batch_size": 1, "fp16": {"min_loss_scale": 0}})", "fp16.min_loss_scale"},
    {"unknown_optimizer", R"({"train_batch_size": 1, "optimizer": {"type": "Lamb", "params": {}}})", "optimizer.type"},
    {"optimizer_without_type", R"({"train_batch_size": 1, "optimizer": {"params": {"lr": 1e-3}}})", "optimizer.type"},
    {"beta_one", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"betas": [1.0, 0.999]}}})",
     "optimizer.params.betas"},
    {"beta_negative", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"betas": [0.9, -0.1]}}})",
     "optimizer.params.betas"},
    {"betas_not_pair", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"betas": 0.9}}})",
     "optimizer.params.betas"},
    {"negative_lr", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": -1e-3}}})",
     "optimizer.params.lr"},
    {"zero_eps", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"eps": 0}}})",
     "optimizer.params.eps"},
    {"negative_weight_decay",
     R"({"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"weight_decay": -0.1}}})",
     "optimizer.params.weight_decay"},
    {"max_grad_norm", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"max_grad_norm": 1.0}}})",
     "optimizer.params.max_grad_norm"},
    {"amsgrad", R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"amsgrad": true}}})",
     "optimizer.params.amsgrad"},
    {"unknown_scheduler", R"({"train_batch_size": 1, "scheduler": {"type": "OneCycle", "params": {}}})",
     "scheduler.type"},
    {"scheduler_without_type", R"({"train_batch_size": 1, "scheduler": {"params": {}}})", "scheduler.type"},
    {"zero_warmup_steps",
     R"({"train_batch_size": 1, "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 0}}})",
     "scheduler.params.warmup_num_steps"},
    {"decay_without_total", R"({"train_batch_size": 1, "scheduler": {"type": "WarmupDecayLR", "params": {}}})",
     "scheduler.params.total_num_steps"},
    {"cos_ratio_above_one",
     R"({"train_batch_size": 1, "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 9, "cos_min_ratio": 2}}})",
     "scheduler.params.cos_min_ratio"},
    {"aio_block_not_power_of_two", R"({"train_batch_size": 1, "aio": {"block_size": 1000}})", "aio.block_size"},
    {"aio_zero_queue", R"({"train_batch_size": 1, "aio": {"queue_depth": 0}})", "aio.queue_depth"},
    {"aio_zero_parallelism", R"({"train_batch_size": 1, "aio": {"intra_op_parallelism": 0}})",
     "aio.intra_op_parallelism"},
    {"aio_backend", R"({"train_batch_size": 1, "aio": {"backend": "spdk"}})", "aio.backend"},
    {"negative_clipping", R"({"train_batch_size": 1, "gradient_clipping": -1})", "gradient_clipping"},
    {"zero_steps_per_print", R"({"train_batch_size": 1, "steps_per_print": 0})", "steps_per_print"},
    {"grad_accum_dtype", R"({"train_batch_size": 1, "tierzero": {"grad_accum_dtype": "fp16"}})",
     "tierzero.grad_accum_dtype"},
    {"offload_grad_accumulator", R"({"train_batch_size": 1, "tierzero": {"offload_grad_accumulator": "gpu"}})",
     "tierzero.offload_grad_accumulator must be \"auto\", \"device\" or \"host\", got \"gpu\""},
    {"optimizer_state_dtype", R"({"train_batch_size": 1, "tierzero": {"optimizer_state_dtype": "fp16"}})",
     "tierzero.optimizer_state_dtype must be \"fp32\", \"bf16\" or \"int8\""},
    {"master_weights_value", R"({"train_batch_size": 1, "tierzero": {"master_weights": "bf16"}})",
     "tierzero.master_weights must be \"fp32\" or \"compact\", got \"bf16\""},
    {"master_weights_needs_bf16", R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
       "offload_optimizer": {"device": "cpu"}}, "tierzero": {"master_weights": "compact"}})",
     "needs bf16.enabled true and zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" (this config has "
     "fp32 and offload_optimizer \"cpu\"); set those, or tierzero.master_weights \"fp32\""},
    {"master_weights_needs_offload", R"({"train_batch_size": 1, "bf16": {"enabled": true},
       "tierzero": {"master_weights": "compact"}})",
     "(this config has bf16 and offload_optimizer \"none\")"},
    {"master_weights_params_on_nvme", R"({"train_batch_size": 1, "bf16": {"enabled": true}, "zero_optimization":
       {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "nvme", "nvme_path": "/n"}},
       "tierzero": {"master_weights": "compact"}})",
     "tierzero.master_weights \"compact\" with zero_optimization.offload_param.device \"nvme\" is not supported"},
    {"gpu_share_one", R"({"train_batch_size": 1, "tierzero": {"gpu_optimizer_share": 1}})",
     "tierzero.gpu_optimizer_share must be below 1"},
    {"gpu_share_negative", R"({"train_batch_size": 1, "tierzero": {"gpu_optimizer_share": -0.1}})",
     "tierzero.gpu_optimizer_share must be a finite number in [0, 1]"},
    {"gpu_share_text", R"({"train_batch_size": 1, "tierzero": {"gpu_optimizer_share": "half"}})",
     "tierzero.gpu_optimizer_share"},
    {"gpu_share_needs_compact", R"({"train_batch_size": 1, "bf16": {"enabled": true}, "zero_optimization":
       {"stage": 3, "offload_optimizer": {"device": "cpu"}}, "tierzero": {"gpu_optimizer_share": 0.3}})",
     "(this config has offload_optimizer \"cpu\" and master_weights \"fp32\"); set those, or "
     "tierzero.gpu_optimizer_share 0"},
    {"gpu_share_needs_offload", R"({"train_batch_size": 1, "bf16": {"enabled": true},
       "tierzero": {"gpu_optimizer_share": 0.3}})",
     "tierzero.gpu_optimizer_share steps a share of the offloaded optimizer's compact master on the GPU"},
    {"kept_activations_text", R"({"train_batch_size": 4, "tierzero": {"kept_activations": "all"}})",
     "tierzero.kept_activations must be an integer >= 0 or \"auto\", got \"all\""},
    {"kept_activations_negative", R"({"train_batch_size": 4, "tierzero": {"kept_activations": -1}})",
     "tierzero.kept_activations"},
    {"kept_activations_needs_stage3", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
       "zero_optimization": {"stage": 2}, "tierzero": {"kept_activations": 2}})",
     "tierzero.kept_activations 2 keeps decoder layers' graphs in the window of a step's micro-batches: it needs "
     "zero_optimization.stage 3 and gradient_accumulation_steps >= 2 (this config has stage 2 and 4"},
    {"kept_activations_one_micro_batch", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
       "zero_optimization": {"stage": 3}, "tierzero": {"kept_activations": 1}})",
     "(this config has stage 3 and 1 accumulation steps); set those, or 0 / \"auto\""},
    {"window_group_zero", R"({"train_batch_size": 4, "tierzero": {"window_group": 0}})", "tierzero.window_group"},
    {"window_group_text", R"({"train_batch_size": 4, "tierzero": {"window_group": "all"}})",
     "tierzero.window_group must be an integer >= 1 or \"auto\", got \"all\""},
    {"window_group_not_dividing", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
       "zero_optimization": {"stage": 3}, "tierzero": {"window_group": 3}})",
     "must divide gradient_accumulation_steps (this config has stage 3 and 4 accumulation steps); choose a "
     "divisor, or \"auto\""},
    {"window_group_needs_stage3", R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4,
       "zero_optimization": {"stage": 2}, "tierzero": {"window_group": 2}})",
     "tierzero.window_group 2 runs that many micro-batches of a step's window as one batch: it needs "
     "zero_optimization.stage 3"},
    {"int8_needs_offload", R"({"train_batch_size": 1, "tierzero": {"optimizer_state_dtype": "int8"}})",
     "tierzero.optimizer_state_dtype \"int8\" (8-bit blockwise moments) is kept by the offloaded optimizer only"},
    {"offload_grad_dtype_value", R"({"train_batch_size": 1, "tierzero": {"offload_grad_dtype": "fp16"}})",
     "tierzero.offload_grad_dtype must be \"fp32\" or \"bf16\", got \"fp16\""},
    {"offload_grad_dtype_needs_offload", R"({"train_batch_size": 1, "tierzero": {"offload_grad_dtype": "bf16"}})",
     "tierzero.offload_grad_dtype \"bf16\" sets the offloaded optimizer's host gradient partition: set "
     "zero_optimization.offload_optimizer.device"},
    {"records_value", R"({"train_batch_size": 1, "tierzero": {"optimizer_records_in_memory": "many"}})",
     "tierzero.optimizer_records_in_memory must be an integer >= 0 or \"auto\", got \"many\""},
    {"records_negative", R"({"train_batch_size": 1, "tierzero": {"optimizer_records_in_memory": -1}})",
     "tierzero.optimizer_records_in_memory must be an integer >= 0 or \"auto\", got -1"},
    {"records_need_nvme", R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer":
       {"device": "cpu"}}, "tierzero": {"optimizer_records_in_memory": 4}})",
     "it needs zero_optimization.offload_optimizer.device \"nvme\" (this config has \"cpu\")"},
    {"records_auto_needs_a_limit", R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
       "offload_optimizer": {"device": "nvme", "nvme_path": "/n"}}, "tierzero": {"optimizer_records_in_memory":
       "auto"}})",
     "tierzero.optimizer_records_in_memory \"auto\" keeps as many records as tierzero.pinned_memory_limit holds: set "
     "tierzero.pinned_memory_limit"},
    {"checkpoint_compression", R"({"train_batch_size": 1, "tierzero": {"checkpoint": {"compression": "lz4"}}})",
     "tierzero.checkpoint.compression"},
    {"checkpoint_level", R"({"train_batch_size": 1, "tierzero": {"checkpoint": {"level": 30}}})",
     "tierzero.checkpoint.level"},
    {"memory_limit_text", R"({"train_batch_size": 1, "tierzero": {"gpu_memory_limit": "lots"}})",
     "tierzero.gpu_memory_limit"},
    {"negative_threads", R"({"train_batch_size": 1, "tierzero": {"cpu_threads": -1}})", "tierzero.cpu_threads"},
    {"data_dtype", R"({"train_batch_size": 1, "tierzero": {"data": {"dtype": "int8"}}})", "tierzero.data.dtype"},
    {"data_seq_len", R"({"train_batch_size": 1, "tierzero": {"data": {"seq_len": 0}}})", "tierzero.data.seq_len"},
    {"not_an_object", R"([1, 2])", "JSON object"},
    {"not_json", R"({"train_batch_size": 1,)", "not valid JSON"},
    // nlohmann throws out_of_range, not parse_error, for a number past double (found by fuzz_ds_config).
    {"number_overflow", R"({"train_batch_size": 5e999})", "not valid JSON"},
    // micro * accumulation * world overflowed int64_t (found by fuzz_ds_config on 16 cores): derived,
    // checked against a given train_batch_size, and with a large world size.
    {"batch_product_overflow",
     R"({"train_micro_batch_size_per_gpu": 7777777777777777777, "gradient_accumulation_steps": 4})", "past any batch"},
    {"batch_check_overflow", R"({"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4611686018427387904,
       "gradient_accumulation_steps": 2})",
     "past any batch"},
    {"batch_world_overflow", R"({"train_micro_batch_size_per_gpu": 4611686018427387904})", "past any batch", 4},
};

class DsConfigError : public testing::TestWithParam<ErrorCase> {};

TEST_P(DsConfigError, NamesTheKey) {
  const ErrorCase& c = GetParam();
  EXPECT_ERROR(parse_ds_config_text(c.json, ResolveHints{.world_size = c.world_size}), ErrorCode::kInvalidArgument,
               c.key)
      << c.json;
}

INSTANTIATE_TEST_SUITE_P(AllClasses, DsConfigError, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

TEST(DsConfigFile, ErrorsStartWithThePath) {
  EXPECT_ERROR(load_ds_config("/nonexistent/ds.json", ResolveHints{}), ErrorCode::kNotFound, "/nonexistent/ds.json");
}

// A key given twice is refused naming its path and both lines, as DeepSpeed refuses such a file
// (its loader's dict_raise_error_on_duplicate_keys), instead of the last value winning.
TEST(DsConfigDuplicateKeys, AreRefusedWithThePathAndLines) {
  const char* text = R"({
  "train_batch_size": 8,
  "zero_optimization": {
    "stage": 2,
    "offload_optimizer": {"device": "cpu"},
    "stage": 3
  },
  "tierzero": {"ignore_unknown_keys": [{"a": 1, "a": 2}]},
  "train_batch_size": 16
})";
  Result<DsConfig> r = parse_ds_config_text(text, ResolveHints{});
  ASSERT_ERROR(r, ErrorCode::kInvalidArgument, "duplicate key 'zero_optimization.stage' at lines 4 and 6");
  const std::string message = r.status().message();
  EXPECT_NE(message.find("duplicate key 'tierzero.ignore_unknown_keys[0].a' at lines 8 and 8"), std::string::npos)
      << message;
  EXPECT_NE(message.find("duplicate key 'train_batch_size' at lines 2 and 9"), std::string::npos) << message;
  EXPECT_NE(message.find("DeepSpeed refuses a ds_config file with duplicate keys"), std::string::npos) << message;
  // The same key in different objects is no duplicate; a syntax error is still reported as such.
  EXPECT_OK(parse_ds_config_text(R"({"train_batch_size": 1, "fp16": {"enabled": false}, "bf16": {"enabled": false}})",
                                 ResolveHints{}));
  EXPECT_ERROR(parse_ds_config_text(R"({"train_batch_size": 1, "train_batch_size": })", ResolveHints{}),
               ErrorCode::kInvalidArgument, "ds_config is not valid JSON: parse error at line 1, column 45");
}

}  // namespace
}  // namespace tierzero::engine
