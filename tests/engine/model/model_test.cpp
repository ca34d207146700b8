// engine/model without Python: config parsing, init, unit chaining, gradients, loss, errors.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>

#include "engine/model/functional_model.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

// Every tensor in this binary is tiny: one intra-op thread is fastest, and on a loaded 2-core CI
// machine idle-spinning OpenMP workers made the finite-difference loops 20x slower.
const bool kOneIntraOpThread = [] {
  at::set_num_threads(1);
  return true;
}();

// A tiny model for the unit tests: GQA, biases per the family, 2 layers.
ModelConfig small_config(const std::string& model_type) {
  ModelConfig c = tiny_llama_config();
  c.model_type = model_type;
  c.vocab_size = 23;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.sliding_window_layers.assign(2, false);
  return c;
}

std::string llama_json(const std::string& extra) {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32, "hidden_size": 64,
             "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4)" +
         extra + "}";
}

// Sizes far past any real model are refused before the parameter count overflows int64_t (found by
// fuzz_model_config: hidden 2777777777777778 x intermediate 5555555555555552).
TEST(ModelConfig, RefusesSizesPastTheSupportedRange) {
  EXPECT_ERROR(parse_model_config(R"({"model_type": "llama", "vocab_size": 32, "hidden_size": 2777777777777778,
      "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4})",
                                  "config.json"),
               ErrorCode::kInvalidArgument, "hidden_size");
}

// A negative layer count reached the sliding-window table before validation: length_error, i.e.
// std::terminate (found by fuzz_model_config on 16 cores: a Mistral config with layers -2).
TEST(ModelConfig, RefusesANegativeLayerCountOfASlidingWindowModel) {
  EXPECT_ERROR(parse_model_config(R"({"model_type": "mistral", "vocab_size": 32, "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": -2, "num_attention_heads": 4, "sliding_window": 64})",
                                  "config.json"),
               ErrorCode::kInvalidArgument, "num_hidden_layers -2");
}

TEST(ModelConfig, ParsesTransformers4RopeKeys) {
  auto c =
      parse_model_config(llama_json(R"(, "num_key_value_heads": 2, "rope_theta": 500000.0, "torch_dtype": "bfloat16",
                   "rope_scaling": {"type": "linear", "factor": 2.0}, "attention_bias": true)"),
                         "test.json");
  ASSERT_OK(c);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_DOUBLE_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 2.0);
  EXPECT_EQ(c->torch_dtype, "bfloat16");
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->o_proj_bias);  // Llama's attention_bias covers o_proj too
  EXPECT_FALSE(c->sliding_window.has_value());
}

TEST(ModelConfig, ParsesTransformers5RopeParameters) {
  auto c = parse_model_config(llama_json(R"(, "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5,
      "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"),
                              "test.json");
  ASSERT_OK(c);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c->rope_theta, 5e5);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
}

TEST(ModelConfig, FamilyRules) {
  auto qwen = parse_model_config(R"({"model_type": "qwen2", "vocab_size": 8, "hidden_size": 8, "intermediate_size": 8,
      "num_hidden_layers": 3, "num_attention_heads": 2, "use_sliding_window": true, "sliding_window": 5,
      "max_window_layers": 1})",
                                 "qwen.json");
  ASSERT_OK(qwen);
  EXPECT_TRUE(qwen->qkv_bias);
  EXPECT_FALSE(qwen->o_proj_bias);
  EXPECT_EQ(qwen->architecture, "Qwen2ForCausalLM");
  EXPECT_FALSE(qwen->layer_uses_sliding_window(0));
  EXPECT_TRUE(qwen->layer_uses_sliding_window(2));

  auto mistral = parse_model_config(R"({"model_type": "mistral", "vocab_size": 8, "hidden_size": 8,
      "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, "attention_bias": true})",
                                    "mistral.json");
  ASSERT_OK(mistral);
  EXPECT_FALSE(mistral->qkv_bias);
  EXPECT_EQ(mistral->sliding_window, 4096);  // transformers' default when the key is absent
  EXPECT_TRUE(mistral->layer_uses_sliding_window(1));
}

TEST(ModelConfig, NewFamilyRules) {
  const std::string sizes = R"("vocab_size": 8, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 6,
      "num_attention_heads": 2)";
  auto qwen3 = parse_model_config(R"({"model_type": "qwen3", "attention_bias": true, )" + sizes + "}", "q3.json");
  ASSERT_OK(qwen3);
  EXPECT_EQ(qwen3->architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(qwen3->head_dim, 128) << "Qwen3Config's default, not hidden / heads";
  EXPECT_TRUE(qwen3->qk_norm && qwen3->qkv_bias && qwen3->o_proj_bias);
  EXPECT_FALSE(qwen3->sliding_window.has_value()) << "use_sliding_window defaults to false";

  auto phi3 = parse_model_config(R"({"model_type": "phi3", "partial_rotary_factor": 0.5, "head_dim": 8,
      "max_position_embeddings": 64, "original_max_position_embeddings": 16, "sliding_window": 3,
      "rope_scaling": {"type": "su", "short_factor": [1, 2], "long_factor": [3, 4]}, )" + sizes + "}", "phi3.json");
  ASSERT_OK(phi3);
  EXPECT_TRUE(phi3->fused_projections());
  EXPECT_EQ(phi3->rotary_dim(), 4);
  EXPECT_EQ(phi3->rope_scaling.type, "longrope") << "su is longrope";
  EXPECT_EQ(phi3->rope_scaling.factor, 4.0) << "max_position_embeddings / original_max_position_embeddings";
  EXPECT_EQ(phi3->pad_token_id, 32000) << "Phi3Config's default";
  EXPECT_TRUE(phi3->layer_uses_sliding_window(0) && phi3->layer_uses_sliding_window(5));

  auto gemma2 = parse_model_config(R"({"model_type": "gemma2", )" + sizes + "}", "g2.json");
  ASSERT_OK(gemma2);
  EXPECT_EQ(gemma2->hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(gemma2->tie_word_embeddings);
  EXPECT_EQ(gemma2->head_dim, 256);
  EXPECT_EQ(gemma2->attn_logit_softcapping, 50.0);
  EXPECT_EQ(gemma2->final_logit_softcapping, 30.0);
  EXPECT_EQ(gemma2->query_pre_attn_scalar, 256.0);
  EXPECT_TRUE(gemma2->layer_uses_sliding_window(0));
  EXPECT_FALSE(gemma2->layer_uses_sliding_window(1)) << "every 2nd layer is global";

  auto gemma3 = parse_model_config(R"({"architectures": ["Gemma3ForCausalLM"], "rope_local_base_freq": 10000.0,
      "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "final_logit_softcapping": null, )" + sizes + "}",
                                   "g3.json");
  ASSERT_OK(gemma3);
  EXPECT_EQ(gemma3->model_type, "gemma3_text");
  EXPECT_EQ(gemma3->rope_theta, 1e6) << "Gemma3TextConfig's global default";
  EXPECT_EQ(gemma3->rope_local_base_freq, 1e4);
  EXPECT_EQ(gemma3->rope_scaling.type, "linear");
  EXPECT_FALSE(gemma3->final_logit_softcapping.has_value());
  EXPECT_TRUE(gemma3->qk_norm);
  EXPECT_TRUE(gemma3->layer_uses_sliding_window(4));
  EXPECT_FALSE(gemma3->layer_uses_sliding_window(5)) << "every 6th layer is global";

  for (const auto& [config, want] : {std::pair{ModelConfig(*qwen3), "q3"}, std::pair{ModelConfig(*phi3), "phi3"},
                                     std::pair{ModelConfig(*gemma2), "g2"}, std::pair{ModelConfig(*gemma3), "g3"}}) {
    auto again = parse_model_config(to_hf_json(config), want);
    ASSERT_OK(again);
    EXPECT_TRUE(*again == config) << to_hf_json(config);
  }
}

TEST(ModelConfig, RefusesWhatTheNewFamiliesDoNotCover) {
  const std::string sizes = R"("vocab_size": 8, "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 2,
      "num_attention_heads": 2)";
  auto multimodal = parse_model_config(R"({"model_type": "gemma3", )" + sizes + "}", "g3.json");
  EXPECT_ERROR(multimodal, ErrorCode::kUnsupported, "\"gemma3\"");
  auto bidirectional =
      parse_model_config(R"({"model_type": "gemma3_text", "use_bidirectional_attention": true, )" + sizes + "}", "g.json");
  EXPECT_ERROR(bidirectional, ErrorCode::kUnsupported, "use_bidirectional_attention");
  auto phi_linear = parse_model_config(
      R"({"model_type": "phi3", "rope_scaling": {"rope_type": "linear", "factor": 2.0}, )" + sizes + "}", "p.json");
  EXPECT_ERROR(phi_linear, ErrorCode::kUnsupported, "phi3");
  auto short_factors = parse_model_config(
      R"({"model_type": "phi3", "rope_scaling": {"rope_type": "longrope", "short_factor": [1], "long_factor": [1]}, )" +
          sizes + "}",
      "p.json");
  EXPECT_ERROR(short_factors, ErrorCode::kInvalidArgument, "short_factor");
  auto llama_partial = parse_model_config(llama_json(R"(, "rope_parameters": {"partial_rotary_factor": 0.5})"), "l.json");
  EXPECT_ERROR(llama_partial, ErrorCode::kUnsupported, "partial_rotary_factor");
}

TEST(ModelConfig, ErrorsNameFileAndKey) {
  auto missing = parse_model_config(R"({"model_type": "llama", "vocab_size": 8})", "dir/config.json");
  EXPECT_ERROR(missing, ErrorCode::kInvalidArgument, "dir/config.json");
  EXPECT_ERROR(missing, ErrorCode::kInvalidArgument, "hidden_size");

  auto yarn = parse_model_config(llama_json(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})"), "c.json");
  EXPECT_EQ(yarn.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(yarn.status().message().find("yarn"), std::string::npos);

  auto heads = parse_model_config(llama_json(R"(, "num_key_value_heads": 3)"), "c.json");
  EXPECT_EQ(heads.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(heads.status().message().find("num_key_value_heads"), std::string::npos);

  auto gpt2 = parse_model_config(R"({"model_type": "gpt2"})", "c.json");
  EXPECT_EQ(gpt2.status().code(), ErrorCode::kUnsupported);

  EXPECT_EQ(load_model_config("/nonexistent/dir").status().code(), ErrorCode::kNotFound);
}

TEST(ModelConfig, TinyLlamaCountsAndFlops) {
  const ModelConfig c = tiny_llama_config();
  auto params = init_parameters(c, 1, at::kFloat, at::kCPU);
  int64_t numel = 0;
  for (const auto& [name, t] : params) numel += t.numel();
  EXPECT_EQ(numel, num_parameters(c));
  EXPECT_EQ(numel, 853120);
  // 6 * (layers' matmul weights + LM head) + 12 * L * heads * head_dim * T.
  const double matmul = 4.0 * (128 * (128 + 2 * 64) + 128 * 128 + 3 * 128 * 384) + 256.0 * 128;
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 64), 6 * matmul + 12.0 * 4 * 4 * 32 * 64);
  // LoRA: no weight gradients of the base, 4 * matmul.
  EXPECT_DOUBLE_EQ(training_flops_per_token(c, 64, /*weight_grads=*/false), 4 * matmul + 12.0 * 4 * 4 * 32 * 64);
}

TEST(InitParameters, FollowsHfInitAndIsSeeded) {
  ModelConfig c = small_config("llama");
  c.tie_word_embeddings = true;
  c.pad_token_id = 3;
  c.initializer_range = 0.5;
  auto a = init_parameters(c, 7, at::kFloat, at::kCPU);
  auto b = init_parameters(c, 7, at::kBFloat16, at::kCPU);
  auto other = init_parameters(c, 8, at::kFloat, at::kCPU);
  EXPECT_EQ(a.count("lm_head.weight"), 0u);
  EXPECT_OK(check_params(*make_causal_lm(c), a));
  for (const auto& [name, t] : a) {
    EXPECT_TRUE(at::equal(t.to(at::kBFloat16), b.at(name))) << name;  // same values whatever the dtype
    if (name.find("norm") != std::string::npos) {
      EXPECT_TRUE(at::equal(t, at::ones_like(t))) << name;
    } else {
      EXPECT_FALSE(at::equal(t, other.at(name))) << name;
    }
  }
  const at::Tensor& embed = a.at("model.embed_tokens.weight");
  EXPECT_TRUE(at::equal(embed[3], at::zeros_like(embed[3])));
  const at::Tensor& q = a.at("model.layers.0.self_attn.q_proj.weight");
  EXPECT_NEAR(q.std().item<double>(), 0.5, 0.1);
}

TEST(FunctionalModel, UnitsListTheirParams) {
  ModelConfig c = small_config("qwen2");
  c.qkv_bias = true;
  c.tie_word_embeddings = true;
  auto model = make_causal_lm(c);
  ASSERT_EQ(model->num_units(), 4u);
  EXPECT_EQ(model->unit_params(0)[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(model->unit_params(3)[1].name, "model.embed_tokens.weight");  // tied head
  const auto& layer = model->unit_params(2);
  ASSERT_EQ(layer.size(), 12u);
  EXPECT_EQ(layer[0].name, "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(layer[2].name, "model.layers.1.self_attn.q_proj.bias");
  EXPECT_EQ(layer[3].shape, (std::vector<int64_t>{8, 16}));  // k_proj: 2 kv heads x head_dim 4
  EXPECT_EQ(all_params(*model).size(), 1 + 2 * 12 + 1u);
}

TEST(FunctionalModel, EmbeddingPadRowGetsNoGradient) {
  ModelConfig c = small_config("llama");
  c.pad_token_id = 2;
  auto model = make_causal_lm(c);
  at::Tensor embed = at::randn({c.vocab_size, c.hidden_size}).requires_grad_(true);
  at::Tensor tokens = at::tensor(std::vector<int64_t>{2, 5, 2, 7}).view({1, 4});
  model->forward_unit(0, tokens, {embed}).sum().backward();
  EXPECT_TRUE(at::equal(embed.grad()[2], at::zeros({c.hidden_size})));
  EXPECT_TRUE(at::equal(embed.grad()[5], at::ones({c.hidden_size})));
}

TEST(FunctionalModel, UnitChainEqualsForwardFull) {
  ModelConfig c = small_config("llama");
  auto model = make_causal_lm(c);
  auto params = init_parameters(c, 3, at::kFloat, at::kCPU);
  at::Tensor tokens = at::randint(c.vocab_size, {2, 7}, at::kLong);
  at::Tensor x = tokens;
  for (size_t u = 0; u < model->num_units(); ++u) {
    std::vector<at::Tensor> unit;
    for (const ParamSpec& p : model->unit_params(u)) unit.push_back(params.at(p.name));
    at::NoGradGuard no_grad;  // as the engine runs a unit's forward
    x = model->forward_unit(u, x, unit);
  }
  at::Tensor full = forward_full(*model, tokens, params);
  EXPECT_EQ(full.sizes(), (std::vector<int64_t>{2, 7, c.vocab_size}));
  EXPECT_EQ(full.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(x, full));
}

TEST(FunctionalModel, CausalPrefixIsStable) {
  // Position t depends only on tokens 0..t: logits of a prefix equal the prefix of the logits.
  ModelConfig c = small_config("mistral");
  c.sliding_window = 3;
  c.sliding_window_layers.assign(2, true);
  auto model = make_causal_lm(c);
  auto params = init_parameters(c, 4, at::kDouble, at::kCPU);
  at::Tensor tokens = at::randint(c.vocab_size, {1, 9}, at::kLong);
  at::Tensor full = forward_full(*model, tokens, params);
  at::Tensor prefix = forward_full(*model, tokens.narrow(1, 0, 5), params);
  EXPECT_TRUE(at::allclose(full.narrow(1, 0, 5), prefix, 1e-12, 1e-12));
}

TEST(FunctionalModel, RejectsWrongParams) {
  ModelConfig c = small_config("llama");
  auto model = make_causal_lm(c);
  auto params = init_parameters(c, 3, at::kFloat, at::kCPU);
  at::Tensor hidden = at::zeros({1, 2, c.hidden_size});
  EXPECT_THROW(model->forward_unit(1, hidden, {params.at("model.norm.weight")}), Error);
  std::vector<at::Tensor> wrong = {params.at("model.norm.weight"), params.at("model.norm.weight")};
  EXPECT_THROW(model->forward_unit(3, hidden, wrong), Error);
  params.erase("model.layers.1.mlp.up_proj.weight");
  Status s = check_params(*model, params);
  EXPECT_NE(s.message().find("model.layers.1.mlp.up_proj.weight missing"), std::string::npos) << s.to_string();
}

// Autograd gradients of sum(unit(x) * probe) against central finite differences, in double.
void expect_unit_gradients_match(const ModelConfig& c, size_t unit, int64_t seq_len) {
  auto model = make_causal_lm(c);
  auto all = init_parameters(c, 11, at::kDouble, at::kCPU);
  std::vector<at::Tensor> params;
  for (const ParamSpec& p : model->unit_params(unit)) {
    // Random biases and norm weights, so their gradients are exercised away from 0 / 1.
    params.push_back((all.at(p.name) + 0.3 * at::randn_like(all.at(p.name))).requires_grad_(true));
  }
  at::Tensor x = at::randn({2, seq_len, c.hidden_size}, at::kDouble).requires_grad_(true);
  at::Tensor probe = at::randn_like(model->forward_unit(unit, x, params));
  (model->forward_unit(unit, x, params) * probe).sum().backward();

  auto objective = [&] {
    at::NoGradGuard no_grad;
    return (model->forward_unit(unit, x, params) * probe).sum().item<double>();
  };
  std::vector<std::pair<std::string, at::Tensor>> checked = {{"input", x}};
  for (size_t i = 0; i < params.size(); ++i) checked.emplace_back(model->unit_params(unit)[i].name, params[i]);
  const double eps = 1e-6;
  for (auto& [name, t] : checked) {
    at::Tensor flat = t.detach().view({-1});
    at::Tensor grad = t.grad().view({-1});
    for (int64_t k = 0; k < std::min<int64_t>(flat.numel(), 5); ++k) {
      const int64_t i = (k * 7919) % flat.numel();
      const double saved = flat[i].item<double>();
      flat[i] = saved + eps;
      const double up = objective();
      flat[i] = saved - eps;
      const double down = objective();
      flat[i] = saved;
      const double numeric = (up - down) / (2 * eps), analytic = grad[i].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << name << "[" << i << "]";
    }
  }
}

TEST(FunctionalModel, LayerGradientsMatchFiniteDifferences) {
  ModelConfig llama = small_config("llama");
  llama.qkv_bias = llama.o_proj_bias = llama.mlp_bias = true;
  llama.rope_scaling.type = "linear";
  llama.rope_scaling.factor = 2.0;
  expect_unit_gradients_match(llama, 1, 5);

  ModelConfig mistral = small_config("mistral");
  mistral.sliding_window = 3;
  mistral.sliding_window_layers.assign(2, true);
  expect_unit_gradients_match(mistral, 2, 6);  // window < T: the explicit mask path
}

TEST(FunctionalModel, HeadGradientsMatchFiniteDifferences) { expect_unit_gradients_match(small_config("qwen2"), 3, 4); }

// The new families' layers in double: Qwen3's q/k norms, Phi-3's fused projections with partial
// rotary LongRoPE, Gemma 2's eager soft-capped attention through a window, Gemma 3's local RoPE.
TEST(FunctionalModel, Qwen3LayerGradientsMatchFiniteDifferences) {
  ModelConfig qwen3 = small_config("qwen3");
  qwen3.qk_norm = qwen3.qkv_bias = qwen3.o_proj_bias = true;
  expect_unit_gradients_match(qwen3, 1, 5);
}

TEST(FunctionalModel, Phi3LayerGradientsMatchFiniteDifferences) {
  ModelConfig phi3 = small_config("phi3");
  phi3.partial_rotary_factor = 0.5;
  phi3.rope_scaling = {.type = "longrope", .factor = 4.0, .original_max_position_embeddings = 4,
                       .short_factor = {1.0}, .long_factor = {2.0}, .attention_factor = std::nullopt};
  expect_unit_gradients_match(phi3, 1, 6);
}

TEST(FunctionalModel, Gemma2LayerAndHeadGradientsMatchFiniteDifferences) {
  ModelConfig gemma2 = small_config("gemma2");
  gemma2.hidden_act = "gelu_pytorch_tanh";
  gemma2.query_pre_attn_scalar = 6.0;
  gemma2.attn_logit_softcapping = 0.5;
  gemma2.final_logit_softcapping = 2.0;
  gemma2.sliding_window = 3;
  gemma2.sliding_window_layers = {true, false};
  expect_unit_gradients_match(gemma2, 1, 6);
  expect_unit_gradients_match(gemma2, 3, 4);  // final norm, head and soft-capping
}

TEST(FunctionalModel, Gemma3LayerGradientsMatchFiniteDifferences) {
  ModelConfig gemma3 = small_config("gemma3_text");
  gemma3.hidden_act = "gelu_pytorch_tanh";
  gemma3.qk_norm = true;
  gemma3.rope_local_base_freq = 100.0;
  gemma3.sliding_window = 3;
  gemma3.sliding_window_layers = {true, false};
  expect_unit_gradients_match(gemma3, 1, 6);
}

TEST(CausalLmLoss, ShiftsAndIgnores) {
  at::Tensor logits = at::randn({2, 4, 5}, at::kDouble);
  at::Tensor labels = at::tensor(std::vector<int64_t>{1, 2, -100, 4, 0, 3, 1, -100}).view({2, 4});
  // Targets: row 0 predicts labels 2, -100, 4 at positions 0..2; row 1 predicts 3, 1, -100.
  at::Tensor logp = at::log_softmax(logits, -1);
  const double expected = -(logp[0][0][2] + logp[0][2][4] + logp[1][0][3] + logp[1][1][1]).item<double>() / 4;
  EXPECT_NEAR(causal_lm_loss(logits, labels).item<double>(), expected, 1e-12);
  at::Tensor none = at::full({1, 3}, -100, at::kLong);
  EXPECT_TRUE(std::isnan(causal_lm_loss(logits.narrow(0, 0, 1).narrow(1, 0, 3), none).item<double>()));
}

TEST(LoadHfWeights, ReportsMissingAndCorruptFiles) {
  test_support::ScratchDir scratch("tierzero_model");
  const std::string dir = scratch.path(), file = scratch.file("model.safetensors");
  auto missing = load_hf_weights(dir, at::kFloat, at::kCPU);
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);

  const uint64_t huge_header = 1u << 20;
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(&huge_header), 8);
  auto truncated = load_hf_weights(dir, at::kFloat, at::kCPU);
  EXPECT_EQ(truncated.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(truncated.status().message().find("model.safetensors"), std::string::npos);

  const std::string header = R"({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})";
  const uint64_t header_bytes = header.size();
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&header_bytes), 8);
  out << header << std::string(16, '\0');
  out.close();
  auto mis_sized = load_hf_weights(dir, at::kFloat, at::kCPU);
  EXPECT_EQ(mis_sized.status().code(), ErrorCode::kCorrupt);
  EXPECT_NE(mis_sized.status().message().find("tensor 'w'"), std::string::npos) << mis_sized.status().to_string();
}

}  // namespace
}  // namespace tierzero::engine
