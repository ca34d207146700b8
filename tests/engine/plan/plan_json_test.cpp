// The plan as JSON and back.
#include <gtest/gtest.h>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

TEST(PlanJson, RoundTrip) {
  const DsConfig config = testing::config_from(R"({"train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 2, "bf16": {"enabled": true},
      "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}},
      "tierzero": {"pinned_memory_limit": "4GB"}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine());
  ASSERT_OK(p);
  ASSERT_FALSE(p->problems.empty());  // a problem and notes travel too
  const nlohmann::json json = plan_to_json(*p);
  Result<Plan> back = plan_from_json(nlohmann::json::parse(json.dump()));
  ASSERT_OK(back);
  EXPECT_EQ(plan_to_json(*back), json);
  EXPECT_EQ(back->items.size(), p->items.size());
  EXPECT_EQ(back->feasible(), p->feasible());
  EXPECT_EQ(json["feasible"], false);
}

TEST(PlanJson, MissingFieldIsNamed) {
  Result<Plan> p =
      plan_training(testing::llama_1_35b(),
                    testing::config_from(R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1})"),
                    testing::round_machine());
  ASSERT_OK(p);
  nlohmann::json json = plan_to_json(*p);
  json["items"][1].erase("bytes");
  EXPECT_ERROR(plan_from_json(json), ErrorCode::kInvalidArgument, "items[1].bytes");
  json = plan_to_json(*p);
  json["items"][0]["tier"] = "tape";
  EXPECT_ERROR(plan_from_json(json), ErrorCode::kInvalidArgument, "\"tape\"");
}

}  // namespace
}  // namespace tierzero::engine
