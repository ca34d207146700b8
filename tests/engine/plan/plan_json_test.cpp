// The plan as JSON.
#include <gtest/gtest.h>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

TEST(PlanJson, CarriesProblemsItemsAndVerdict) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 2, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}},
      "tierzero": {"pinned_memory_limit": "4GB"}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  ASSERT_FALSE(p->problems.empty());
  const nlohmann::json json = plan_to_json(*p);
  EXPECT_EQ(json["problems"].get<std::vector<std::string>>(), p->problems);
  EXPECT_EQ(json["notes"].get<std::vector<std::string>>(), p->notes);
  EXPECT_EQ(json["items"].size(), p->items.size());
  EXPECT_EQ(json["feasible"], false);
}

}  // namespace
}  // namespace tierzero::engine
