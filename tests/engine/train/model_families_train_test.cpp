// The Qwen3, Phi-3, Gemma 2 and Gemma 3 families trained through the ZeRO engine on the CPU (random
// init from a config.json, the bundled byte corpus): nothing in the engine assumes the Llama layout
// (fused projections, q/k norms, four norms a layer, tied embeddings, soft-capping). Stage 3 with
// parameters and optimizer offloaded to the CPU takes stage 0's first loss exactly and its later
// ones to 1e-4 relative (the offloaded SIMD Adam rounds otherwise); --export writes a directory
// that loads as the same model. Stages 1-2 with the optimizer on the CPU or NVMe and stage 3 with
// parameters and optimizer on NVMe take the same losses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/model/functional_model.h"
#include "tests/support/status_matchers.h"
#include "train_fixture.h"

namespace tierzero::engine::testing {
namespace {

constexpr int kSteps = 3;

nlohmann::json family_config(const std::string& family) {
  nlohmann::json c = {{"vocab_size", 256},       {"hidden_size", 64},      {"intermediate_size", 96},
                      {"num_hidden_layers", 2},  {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                      {"max_position_embeddings", 64}, {"torch_dtype", "float32"}};
  if (family == "qwen3") {
    c.update({{"model_type", "qwen3"}, {"head_dim", 24}, {"attention_bias", true}, {"tie_word_embeddings", true}});
  } else if (family == "phi3") {  // seq_len 32 > 16: LongRoPE's long factors; half of each head rotated
    c.update({{"model_type", "phi3"}, {"pad_token_id", 0}, {"original_max_position_embeddings", 16},
              {"sliding_window", 12}, {"partial_rotary_factor", 0.5},
              {"rope_scaling", {{"type", "su"}, {"original_max_position_embeddings", 16}, {"short_factor", {1.0, 1.5, 2.0, 3.0}},
                                {"long_factor", {2.0, 4.0, 8.0, 16.0}}}}});
  } else if (family == "gemma2") {
    c.update({{"model_type", "gemma2"}, {"head_dim", 16}, {"query_pre_attn_scalar", 24}, {"sliding_window", 8},
              {"attn_logit_softcapping", 2.0}, {"final_logit_softcapping", 3.0}});
  } else {
    c.update({{"architectures", {"Gemma3ForCausalLM"}}, {"model_type", "gemma3_text"}, {"head_dim", 16},
              {"sliding_window", 8}, {"layer_types", {"sliding_attention", "full_attention"}},
              {"rope_local_base_freq", 10000.0}, {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}});
  }
  return c;
}

class FamilyTraining : public ::testing::TestWithParam<std::string> {};

TEST_P(FamilyTraining, Stage3OffloadedMatchesStage0AndExports) {
  ScratchDir dir;
  const std::string model_config = write_config(dir, family_config(GetParam()), "config.json");
  auto run = [&](const nlohmann::json& zero, const std::string& name, const std::string& export_dir) {
    TrainArgs args = train_args(write_config(dir, small_config({{"zero_optimization", zero}}), name), kSteps);
    args.model_config_path = model_config;
    args.export_dir = export_dir;
    return run_train(args);
  };
  TrainRun stage0 = run({{"stage", 0}}, "stage0.json", "");
  TrainRun stage3 = run({{"stage", 3},
                         {"offload_param", {{"device", "cpu"}, {"pin_memory", false}}},
                         {"offload_optimizer", {{"device", "cpu"}, {"pin_memory", false}}}},
                        "stage3.json", dir / "export");
  ASSERT_OK(stage0.summary);
  ASSERT_OK(stage3.summary);
  const std::vector<double>& want = stage0.summary->losses;
  const std::vector<double>& got = stage3.summary->losses;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps));
  std::printf("%s: stage 0 losses %.6f %.6f %.6f; stage 3 offloaded %.6f %.6f %.6f\n", GetParam().c_str(), want[0],
              want[1], want[2], got[0], got[1], got[2]);
  EXPECT_NEAR(got[0], want[0], 1e-6 * want[0]) << "the same initial weights and batch";
  for (int i = 1; i < kSteps; ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * want[i]) << "step " << i + 1;
  EXPECT_LT(want.back(), want.front()) << "it trains";

  const ModelConfig config = value_or_throw(load_model_config(model_config));
  auto exported_config = load_model_config(dir / "export");
  ASSERT_OK(exported_config);
  EXPECT_TRUE(*exported_config == config);
  auto weights = load_hf_weights(dir / "export", at::kFloat, at::kCPU);
  ASSERT_OK(weights);
  EXPECT_OK(check_params(*make_causal_lm(config), *weights));
  EXPECT_EQ(weights->count("lm_head.weight"), config.tie_word_embeddings ? 0u : 1u);
}

TEST_P(FamilyTraining, EveryStageAndOffloadMatchesStage0) {
  ScratchDir dir;
  const std::string model_config = write_config(dir, family_config(GetParam()), "config.json");
  auto run = [&](const nlohmann::json& zero, const std::string& name) {
    TrainArgs args = train_args(write_config(dir, small_config({{"zero_optimization", zero}}), name), kSteps);
    args.model_config_path = model_config;
    return run_train(args);
  };
  std::filesystem::create_directories(dir / "nvme_optimizer");
  std::filesystem::create_directories(dir / "nvme_params");
  const nlohmann::json nvme_optimizer = {{"device", "nvme"}, {"nvme_path", dir / "nvme_optimizer"}};
  const std::vector<std::pair<std::string, nlohmann::json>> runs = {
      {"stage 1, optimizer on the CPU", {{"stage", 1}, {"offload_optimizer", {{"device", "cpu"}, {"pin_memory", false}}}}},
      {"stage 2, optimizer on NVMe", {{"stage", 2}, {"offload_optimizer", nvme_optimizer}}},
      {"stage 3, parameters and optimizer on NVMe",
       {{"stage", 3}, {"offload_param", {{"device", "nvme"}, {"nvme_path", dir / "nvme_params"}}},
        {"offload_optimizer", nvme_optimizer}}},
  };
  const TrainRun stage0 = run({{"stage", 0}}, "stage0.json");
  ASSERT_OK(stage0.summary);
  const std::vector<double>& want = stage0.summary->losses;
  ASSERT_EQ(want.size(), static_cast<size_t>(kSteps));
  for (size_t r = 0; r < runs.size(); ++r) {
    const TrainRun got = run(runs[r].second, "run" + std::to_string(r) + ".json");
    ASSERT_OK(got.summary) << runs[r].first;
    const std::vector<double>& losses = got.summary->losses;
    ASSERT_EQ(losses.size(), static_cast<size_t>(kSteps)) << runs[r].first;
    EXPECT_NEAR(losses[0], want[0], 1e-6 * want[0]) << runs[r].first << ": the same initial weights and batch";
    for (int i = 1; i < kSteps; ++i) EXPECT_NEAR(losses[i], want[i], 1e-4 * want[i]) << runs[r].first << ", step " << i + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTraining, ::testing::Values("qwen3", "phi3", "gemma2", "gemma3_text"));

}  // namespace
}  // namespace tierzero::engine::testing
