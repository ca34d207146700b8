// Parity with Hugging Face transformers: tiny random models saved by save_pretrained, their logits,
// loss and parameter gradients, and LlamaRotaryEmbedding's cos/sin, all written by make_hf_fixture.py (run once per
// build tree; the tests skip when transformers is not installed).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <set>

#include "engine/model/functional_model.h"
#include "engine/model/internal/load_safetensors.h"
#include "engine/model/internal/rope.h"
#include "engine/plan/plan.h"
#include "tests/support/python.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

// make_hf_fixture.py's directory (the script is a no-op when it is up to date); skips the test when
// transformers (or the interpreter) is missing.
#define REQUIRE_HF_FIXTURE(dir_var)                                                                        \
  std::string skip_reason_;                                                                                \
  const std::string dir_var =                                                                              \
      test_support::python_fixture_dir(TIERZERO_HF_FIXTURE_SCRIPT, TIERZERO_HF_FIXTURE_DIR, skip_reason_); \
  if (dir_var.empty()) GTEST_SKIP() << skip_reason_

std::map<std::string, at::Tensor> load_reference(const std::string& path) {
  return value_or_throw(load_safetensors_file(path, std::nullopt, at::kCPU));
}

// max |a - b| / max |b|: the error relative to the reference's scale.
double relative_max_error(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

class HfModelParity : public testing::TestWithParam<std::string> {};

TEST_P(HfModelParity, LogitsAndLossMatchTransformers) {
  REQUIRE_HF_FIXTURE(root);
  const std::string dir = root + "/" + GetParam();
  auto config = load_model_config(dir);
  ASSERT_OK(config);
  auto model = make_causal_lm(*config);
  auto reference = load_reference(dir + "/reference.safetensors");
  const at::Tensor& tokens = reference.at("input_ids");
  const at::Tensor& labels = reference.at("labels");

  auto fp32 = load_hf_weights(dir, at::kFloat, at::kCPU);
  ASSERT_OK(fp32);
  ASSERT_OK(check_params(*model, *fp32));
  at::NoGradGuard no_grad;
  // fp32: logits within 1e-5 of transformers' (relative to the largest), the loss within 1e-5
  // relative (bit-identical on CPU for most families; the bounds leave room for other kernels).
  at::Tensor logits = forward_full(*model, tokens, *fp32);
  EXPECT_LE(relative_max_error(logits, reference.at("logits_fp32")), 1e-5);

  const double hf_loss = reference.at("loss_fp32").item<double>();
  EXPECT_NEAR(causal_lm_loss(reference.at("logits_fp32"), labels).item<double>(), hf_loss, 1e-6 * hf_loss);
  EXPECT_NEAR(causal_lm_loss(logits, labels).item<double>(), hf_loss, 1e-5 * hf_loss);

  // bf16: within 1e-2 of transformers' bf16 logits (about two bf16 ulps of the largest), and no
  // further from the fp32 reference than transformers' own bf16 run is (with a 25% margin).
  auto bf16 = load_hf_weights(dir, at::kBFloat16, at::kCPU);
  ASSERT_OK(bf16);
  at::Tensor logits_bf16 = forward_full(*model, tokens, *bf16);
  EXPECT_EQ(logits_bf16.scalar_type(), at::kFloat);
  EXPECT_LE(relative_max_error(logits_bf16, reference.at("logits_bf16")), 1e-2);
  const double hf_bf16_spread = relative_max_error(reference.at("logits_bf16"), reference.at("logits_fp32"));
  EXPECT_LE(relative_max_error(logits_bf16, reference.at("logits_fp32")), 1.25 * hf_bf16_spread);
}

TEST_P(HfModelParity, GradientsMatchTransformers) {
  REQUIRE_HF_FIXTURE(root);
  const std::string dir = root + "/" + GetParam();
  auto model = make_causal_lm(value_or_throw(load_model_config(dir)));
  auto reference = load_reference(dir + "/reference.safetensors");
  auto params = value_or_throw(load_hf_weights(dir, at::kFloat, at::kCPU));
  for (auto& [name, p] : params) p.requires_grad_(true);
  at::Tensor logits = forward_full(*model, reference.at("input_ids"), params);
  causal_lm_loss(logits, reference.at("labels")).backward();
  for (const ParamSpec& spec : all_params(*model)) {
    const at::Tensor& hf_grad = reference.at("grad." + spec.name);
    ASSERT_TRUE(params.at(spec.name).grad().defined()) << spec.name;
    EXPECT_LE(relative_max_error(params.at(spec.name).grad(), hf_grad), 1e-4) << spec.name;
  }
}

// The config survives to_hf_json, every tensor transformers saved is a parameter of the model,
// and the planner (`estimate`, which reads config.json without LibTorch) counts each unit's
// parameters as the model lists them.
TEST_P(HfModelParity, ConfigExportAndPlannerAgreeWithTheModel) {
  REQUIRE_HF_FIXTURE(root);
  const std::string dir = root + "/" + GetParam();
  const ModelConfig config = value_or_throw(load_model_config(dir));
  auto again = parse_model_config(to_hf_json(config), "to_hf_json");
  ASSERT_OK(again);
  EXPECT_TRUE(*again == config) << to_hf_json(config);

  auto model = make_causal_lm(config);
  std::set<std::string> names;
  int64_t total = 0;
  for (const ParamSpec& spec : all_params(*model)) {
    names.insert(spec.name);
    total += c10::multiply_integers(spec.shape);
  }
  for (const auto& [name, tensor] : value_or_throw(load_hf_weights(dir, at::kFloat, at::kCPU))) {
    EXPECT_TRUE(names.count(name)) << name << " is in transformers' checkpoint but not a parameter of the model";
  }
  EXPECT_EQ(num_parameters(config), total);

  const ModelDims dims = value_or_throw(load_model_dims(dir));
  EXPECT_EQ(parameter_count(dims), total);
  const std::vector<int64_t> planned = plan::unit_numels(dims);
  ASSERT_EQ(planned.size(), model->num_units());
  for (size_t u = 0; u < model->num_units(); ++u) {
    int64_t unit_total = 0;
    for (const ParamSpec& spec : model->unit_params(u)) unit_total += c10::multiply_integers(spec.shape);
    EXPECT_EQ(planned[u], unit_total) << "unit " << u;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, HfModelParity,
                         testing::Values("llama_untied", "llama_tied_bias_gqa_llama3", "llama31_llama3",
                                         "llama32_tied_llama3", "qwen2_tied_gqa", "qwen2_untied_gqa_sharded",
                                         "qwen3_gqa_head_dim", "qwen3_tied_bias_sliding", "mistral_sliding_window",
                                         "phi3_gqa", "phi3_longrope_partial_sliding", "phi3_su_short",
                                         "gemma2_softcap_sliding", "gemma3_text_local_global"));

class HfRopeParity : public testing::TestWithParam<std::string> {};

TEST_P(HfRopeParity, CosSinMatchLlamaRotaryEmbedding) {
  REQUIRE_HF_FIXTURE(root);
  const std::string dir = root + "/rope/" + GetParam();
  auto config = load_model_config(dir);
  ASSERT_OK(config);
  auto reference = load_reference(dir + "/rope.safetensors");
  const at::Tensor& hf_cos = reference.at("cos");
  auto [cos, sin] = rope_cos_sin(*config, hf_cos.size(0), at::kFloat, at::kCPU);
  EXPECT_LE((cos - hf_cos).abs().max().item<double>(), 1e-6);
  EXPECT_LE((sin - reference.at("sin")).abs().max().item<double>(), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(RopeTypes, HfRopeParity,
                         testing::Values("default", "linear", "dynamic_within", "dynamic_grown", "llama3",
                                         "longrope_short", "longrope_long"));

}  // namespace
}  // namespace tierzero::engine
