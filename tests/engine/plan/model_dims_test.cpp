// The planner's torch-free reading of a Hugging Face config.json.
#include <gtest/gtest.h>

#include <cstdlib>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

TEST(PlanModelDims, BenchmarkShape) {
  const char* dir = std::getenv("TIERZERO_SOURCE_DIR");
  Result<ModelDims> m = load_model_dims(std::string(dir ? dir : ".") + "/benchmarks/models/llama_1.35b.json");
  ASSERT_OK(m);
  EXPECT_EQ(parameter_count(*m), testing::kLlama135bParams);
  EXPECT_EQ(m->head_dim, 128);
  EXPECT_EQ(m->num_key_value_heads, 16);
}

TEST(PlanModelDims, Qwen2BiasesAndGqa) {
  Result<ModelDims> m = parse_model_dims(R"({"model_type": "qwen2", "vocab_size": 1000, "hidden_size": 64,
      "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
      "tie_word_embeddings": true})",
                                         "qwen.json");
  ASSERT_OK(m);
  EXPECT_TRUE(m->qkv_bias);
  EXPECT_FALSE(m->o_proj_bias);
  // embedding + 2 x (norms 2x64, q 64x64+64, k,v 32x64+32 each, o 64x64, mlp 3x64x128) + final norm
  const int64_t layer = 2 * 64 + (64 * 64 + 64) + 2 * (32 * 64 + 32) + 64 * 64 + 3 * 64 * 128;
  EXPECT_EQ(parameter_count(*m), 1000 * 64 + 2 * layer + 64);
}

TEST(PlanModelDims, ErrorsNameTheKey) {
  EXPECT_ERROR(parse_model_dims(R"({"vocab_size": 10})", "c.json"), ErrorCode::kInvalidArgument,
               "c.json: required key \"hidden_size\"");
  EXPECT_ERROR(parse_model_dims(R"({"vocab_size": 10, "hidden_size": -4})", "c.json"), ErrorCode::kInvalidArgument,
               "\"hidden_size\" must be a positive integer");
  EXPECT_ERROR(parse_model_dims(R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 3})",
                                "c.json"),
               ErrorCode::kInvalidArgument, "num_key_value_heads 3");
  EXPECT_EQ(load_model_dims("/nonexistent").status().code(), ErrorCode::kNotFound);
}

}  // namespace
}  // namespace tierzero::engine
