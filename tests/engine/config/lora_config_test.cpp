// tierzero.lora: PEFT LoraConfig's keys read with their meanings, PEFT's defaults, the resolved
// config round-trips, and every value tierzero cannot honour refused naming the key.
#include <gtest/gtest.h>

#include <string>

#include "engine/config/ds_config.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

Result<DsConfig> parse_lora(const nlohmann::json& lora) {
  return parse_ds_config(nlohmann::json{{"train_batch_size", 1}, {"tierzero", {{"lora", lora}}}},
                         ResolveHints{.total_steps = 10});
}

TEST(LoraConfig, AbsentMeansFullFineTuning) {
  Result<DsConfig> c = parse_ds_config(nlohmann::json{{"train_batch_size", 1}}, ResolveHints{.total_steps = 10});
  ASSERT_OK(c);
  EXPECT_FALSE(c->tierzero.lora.has_value());
  EXPECT_FALSE(to_json(*c)["tierzero"].contains("lora"));
}

TEST(LoraConfig, ReadsPeftKeysAndRoundTrips) {
  Result<DsConfig> c = parse_lora({{"r", 16},
                                   {"lora_alpha", 32},
                                   {"lora_dropout", 0.05},
                                   {"target_modules", {"q_proj", "mlp.down_proj"}},
                                   {"bias", "none"},
                                   {"use_rslora", true},
                                   {"init_adapter", "adapters/start"}});
  ASSERT_OK(c);
  ASSERT_TRUE(c->tierzero.lora.has_value());
  const LoraConfig& lora = *c->tierzero.lora;
  EXPECT_EQ(lora.r, 16);
  EXPECT_EQ(lora.lora_alpha, 32.0);
  EXPECT_EQ(lora.lora_dropout, 0.05);
  EXPECT_EQ(lora.target_modules, (std::vector<std::string>{"q_proj", "mlp.down_proj"}));
  EXPECT_TRUE(lora.target_pattern.empty());
  EXPECT_TRUE(lora.use_rslora);
  EXPECT_EQ(lora.init_adapter, "adapters/start");

  Result<DsConfig> again = parse_ds_config(to_json(*c), ResolveHints{.total_steps = 10});
  ASSERT_OK(again);
  EXPECT_EQ(to_json(*again), to_json(*c));
  for (const std::string& warning : again->warnings) EXPECT_EQ(warning.find("lora"), std::string::npos) << warning;
}

TEST(LoraConfig, PeftDefaultsAndStringTargets) {
  Result<DsConfig> defaults = parse_lora(nlohmann::json::object());
  ASSERT_OK(defaults);
  EXPECT_EQ(defaults->tierzero.lora->r, 8);
  EXPECT_EQ(defaults->tierzero.lora->lora_alpha, 8.0);
  EXPECT_EQ(defaults->tierzero.lora->lora_dropout, 0.0);
  EXPECT_EQ(defaults->tierzero.lora->target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));

  Result<DsConfig> all = parse_lora({{"target_modules", "all-linear"}});
  ASSERT_OK(all);
  EXPECT_TRUE(all->tierzero.lora->target_modules.empty());
  EXPECT_EQ(all->tierzero.lora->target_pattern, "all-linear");
  Result<DsConfig> regex = parse_lora({{"target_modules", R"(.*\.layers\.[01]\..*proj)"}});
  ASSERT_OK(regex);
  EXPECT_EQ(regex->tierzero.lora->target_pattern, R"(.*\.layers\.[01]\..*proj)");
}

TEST(LoraConfig, RefusesWhatItCannotHonourNamingTheKey) {
  const struct {
    nlohmann::json lora;
    const char* key;
  } cases[] = {
      {{{"r", 0}}, "tierzero.lora.r"},
      {{{"r", 2.5}}, "tierzero.lora.r"},
      {{{"lora_alpha", 0}}, "tierzero.lora.lora_alpha"},
      {{{"lora_dropout", -0.1}}, "tierzero.lora.lora_dropout"},
      {{{"lora_dropout", 1.0}}, "tierzero.lora.lora_dropout"},
      {{{"lora_dropout", 1.5}}, "tierzero.lora.lora_dropout"},
      {{{"bias", "all"}}, "tierzero.lora.bias"},
      {{{"bias", "some"}}, "tierzero.lora.bias"},
      {{{"target_modules", nlohmann::json::array()}}, "tierzero.lora.target_modules"},
      {{{"target_modules", {"q_proj", 3}}}, "tierzero.lora.target_modules"},
      {{{"target_modules", "(unclosed"}}, "tierzero.lora.target_modules"},
      {{{"use_rslora", "yes"}}, "tierzero.lora.use_rslora"},
      {{{"rank", 8}}, "tierzero.lora.rank"},
  };
  for (const auto& c : cases) {
    Result<DsConfig> parsed = parse_lora(c.lora);
    EXPECT_ERROR(parsed, ErrorCode::kInvalidArgument, c.key) << c.lora.dump();
  }
}

}  // namespace
}  // namespace tierzero::engine
