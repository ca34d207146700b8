#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tierzero::engine::testing {

ModelDims llama_1_35b() {
  ModelDims m;
  m.vocab_size = 32000;
  m.hidden_size = 2048;
  m.intermediate_size = 5504;
  m.num_hidden_layers = 24;
  m.num_attention_heads = 16;
  m.num_key_value_heads = 16;
  m.head_dim = 128;
  return m;
}

DsConfig config_from(const std::string& json_text, int world) {
  ResolveHints hints;
  hints.world_size = world;
  Result<DsConfig> config = parse_ds_config_text(json_text, hints);
  EXPECT_OK(config);
  return config.ok() ? *config : DsConfig{};
}

Machine round_machine() {
  Machine m;
  m.gpu_name = "test";
  m.gpu_tflops = {100, "test"};
  m.compute_efficiency = 1.0;
  m.h2d_gbps = {10, "test"};
  m.d2h_gbps = {10, "test"};
  m.nvme_read_gbps = {1, "test"};
  m.nvme_write_gbps = {2, "test"};
  m.adam_gbps = {10, "test"};
  return m;
}

uint64_t item_bytes(const Plan& plan, Tier tier, const std::string& what) {
  for (const MemoryItem& item : plan.items)
    if (item.tier == tier && item.what == what) return item.bytes;
  return 0;
}

const TierCheck& check(const Plan& plan, const std::string& name) {
  auto it = std::find_if(plan.checks.begin(), plan.checks.end(), [&](const TierCheck& c) { return c.name == name; });
  EXPECT_NE(it, plan.checks.end()) << name;
  return *it;
}

}  // namespace tierzero::engine::testing
