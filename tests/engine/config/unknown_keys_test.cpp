// Unknown ds_config keys are errors naming the nearest known key, at every level tierzero reads;
// DeepSpeed keys tierzero does not act on warn; tierzero.ignore_unknown_keys passes over keys of
// other tools.
#include <gtest/gtest.h>

#include <string>

#include "engine/config/ds_config.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

Result<DsConfig> parse(const std::string& text) { return parse_ds_config_text(text, ResolveHints{.total_steps = 10}); }

TEST(UnknownKeys, AMisspeltKeyIsRefusedNamingTheNearestOne) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimzer": {"device": "cpu"}}})",
       "unknown key 'zero_optimization.offload_optimzer': did you mean offload_optimizer?"},
      {R"({"train_batch_size": 1, "zero_optimisation": {"stage": 3}})",
       "unknown key 'zero_optimisation': did you mean zero_optimization?"},
      {R"({"train_batch_size": 1, "fp16": {"enabled": true, "loss_scael": 0}})",
       "unknown key 'fp16.loss_scael': did you mean loss_scale?"},
      {R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu",
          "pin_memroy": true}}})",
       "unknown key 'zero_optimization.offload_optimizer.pin_memroy': did you mean pin_memory?"},
      {R"({"train_batch_size": 1, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decy": 0.1}}})",
       "unknown key 'optimizer.params.weight_decy': did you mean weight_decay?"},
      {R"({"train_batch_size": 1, "tierzero": {"gpu_memory_limt": "1GB"}})",
       "unknown key 'tierzero.gpu_memory_limt': did you mean gpu_memory_limit?"},
      {R"({"train_batch_size": 1, "tierzero": {"data": {"seqlen": 8}}})",
       "unknown key 'tierzero.data.seqlen': did you mean seq_len?"},
      {R"({"train_batch_size": 1, "aio": {"queue_dpeth": 8}})", "unknown key 'aio.queue_dpeth': did you mean queue_depth?"},
      {R"({"train_batch_size": 1, "gradient_clip": 1.0})", "unknown key 'gradient_clip': did you mean gradient_clipping?"},
      // Nothing near: the keys this level takes.
      {R"({"train_batch_size": 1, "scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 5}}})",
       "unknown key 'scheduler.params.total_num_steps' (scheduler.params takes warmup_max_lr, warmup_min_lr, "
       "warmup_num_steps, warmup_type"},
  };
  for (const Case& c : cases) {
    EXPECT_ERROR(parse(c.json), ErrorCode::kInvalidArgument, c.message) << c.json;
    EXPECT_ERROR(parse(c.json), ErrorCode::kInvalidArgument, "tierzero.ignore_unknown_keys");
  }
}

TEST(UnknownKeys, EveryUnknownKeyOfALevelIsNamed) {
  Result<DsConfig> r = parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 1, "bogus": 3, "stgae": 2}})");
  ASSERT_ERROR(r, ErrorCode::kInvalidArgument, "'zero_optimization.bogus'");
  EXPECT_NE(r.status().message().find("'zero_optimization.stgae': did you mean stage?"), std::string::npos)
      << r.status().message();
}

// DeepSpeed keys tierzero does not act on keep their warning (the registry lists them): one warning
// names them all, each with why.
TEST(UnknownKeys, DeepSpeedKeysTierzeroDoesNotImplementWarn) {
  DsConfig c = parse(R"({"train_batch_size": 1, "zero_allow_untested_optimizer": true,
      "tensorboard": {"enabled": true, "output_path": "tb"}, "zero_optimization": {"stage": 3,
      "zero_quantized_weights": true, "offload_optimizer": {"device": "cpu", "fast_init": true}}})")
                   .value();
  ASSERT_EQ(c.warnings.size(), 1u);
  const std::string& warning = c.warnings[0];
  EXPECT_EQ(warning.rfind("4 ds_config keys have no effect in tierzero (ignored): ", 0), 0u) << warning;
  // Each reason once, after the keys it applies to.
  for (const char* part : {"zero_allow_untested_optimizer=true (tierzero runs its own Adam / AdamW only)",
                           "tensorboard={\"enabled\":true,\"output_path\":\"tb\"} (DeepSpeed's monitor",
                           "zero_optimization.zero_quantized_weights=true, zero_optimization.offload_optimizer."
                           "fast_init=true (a DeepSpeed feature tierzero does not implement)"}) {
    EXPECT_NE(warning.find(part), std::string::npos) << part << " in " << warning;
  }
}

TEST(UnknownKeys, IgnoreUnknownKeysPassesOverKeysOfOtherTools) {
  const char* text = R"({"train_batch_size": 1, "my_tool": {"anything": 1}, "zero_optimization": {"stage": 2,
      "my_key": 5}, "tierzero": {"ignore_unknown_keys": ["my_tool", "zero_optimization.my_key"]}})";
  DsConfig c = parse(text).value();
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_NE(c.warnings[0].find("'zero_optimization.my_key'"), std::string::npos) << c.warnings[0];
  EXPECT_NE(c.warnings[1].find("'my_tool'"), std::string::npos) << c.warnings[1];
  // The list names keys, not levels: a typo beside a listed key still fails.
  EXPECT_ERROR(parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2, "my_key": 5, "sub_grup_size": 1},
      "tierzero": {"ignore_unknown_keys": ["zero_optimization.my_key"]}})"),
               ErrorCode::kInvalidArgument, "did you mean sub_group_size?");
  // A key tierzero knows may not be listed (a typo inside it would pass).
  EXPECT_ERROR(parse(R"({"train_batch_size": 1, "tierzero": {"ignore_unknown_keys": ["zero_optimization"]}})"),
               ErrorCode::kInvalidArgument, "tierzero.ignore_unknown_keys[0] \"zero_optimization\" is a key tierzero knows");
  EXPECT_ERROR(parse(R"({"train_batch_size": 1, "tierzero": {"ignore_unknown_keys": "my_tool"}})"),
               ErrorCode::kInvalidArgument, "tierzero.ignore_unknown_keys must be a list");
  EXPECT_ERROR(parse(R"({"train_batch_size": 1, "tierzero": {"ignore_unknown_keys": [3]}})"),
               ErrorCode::kInvalidArgument, "tierzero.ignore_unknown_keys[0] must be a key path");
}

}  // namespace
}  // namespace tierzero::engine
