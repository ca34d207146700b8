// forward_unit_cached: a sequence run a chunk at a time through the KV cache gives forward_full's
// logits, in every family (sliding windows, soft-capping, partial rotary, q/k norms, local RoPE).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/model/functional_model.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

constexpr int64_t kSeqLen = 11;

// A tiny model of `family`, two layers, the first with a sliding window of 3 where the family has one.
ModelConfig family_config(const std::string& family) {
  ModelConfig c = tiny_llama_config();
  c.model_type = family;
  c.vocab_size = 29;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 4;
  c.sliding_window = 3;
  c.sliding_window_layers = {true, false};
  if (family == "qwen3") c.qk_norm = true;
  if (family == "phi3") c.partial_rotary_factor = 0.5;
  if (family == "gemma2" || family == "gemma3_text") {
    c.hidden_act = "gelu_pytorch_tanh";
    c.query_pre_attn_scalar = 6.0;
    c.final_logit_softcapping = 3.0;
  }
  if (family == "gemma2") c.attn_logit_softcapping = 0.5;
  if (family == "gemma3_text") {
    c.qk_norm = true;
    c.rope_local_base_freq = 100.0;
  }
  return c;
}

class KvCacheTest : public testing::TestWithParam<std::string> {};

TEST_P(KvCacheTest, ChunksThroughTheCacheGiveTheFullForwardsLogits) {
  const ModelConfig config = family_config(GetParam());
  ASSERT_OK(validate_model_config(config));
  const std::unique_ptr<FunctionalModel> model = make_causal_lm(config);
  std::map<std::string, at::Tensor> params = init_parameters(config, 5, at::kDouble, at::kCPU);
  for (auto& [name, p] : params) p.add_(at::randn_like(p) * 0.3);  // norms and biases away from 1 and 0
  const at::Tensor tokens = at::randint(config.vocab_size, {1, kSeqLen}, at::TensorOptions().dtype(at::kLong));
  const at::Tensor full = forward_full(*model, tokens, params);

  std::vector<std::vector<at::Tensor>> units(model->num_units());
  for (size_t u = 0; u < model->num_units(); ++u)
    for (const ParamSpec& spec : model->unit_params(u)) units[u].push_back(params.at(spec.name));
  std::vector<LayerKvCache> caches(model->num_units());
  int64_t start = 0;
  for (const int64_t chunk : {4, 1, 1, 3, 1, 1}) {  // a prompt, single tokens, a chunk past a window
    at::Tensor x = tokens.narrow(1, start, chunk);
    for (size_t u = 0; u < model->num_units(); ++u)
      x = model->forward_unit_cached(u, x, units[u], Projector{}, caches[u]);
    EXPECT_TRUE(at::allclose(x, full.narrow(1, start, chunk), 1e-10, 1e-12))
        << GetParam() << ": positions " << start << ".." << start + chunk - 1 << " differ by "
        << (x - full.narrow(1, start, chunk)).abs().max().item<double>();
    start += chunk;
  }
  ASSERT_EQ(start, kSeqLen);
  EXPECT_EQ(caches[1].length(), kSeqLen);  // layer 1 kept every position
}

INSTANTIATE_TEST_SUITE_P(Families, KvCacheTest,
                         testing::Values("llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gemma3_text"));

TEST(KvCache, ModelsWithoutAnIncrementalForwardSaySo) {
  struct Plain : FunctionalModel {
    size_t num_units() const override { return 0; }
    const std::vector<ParamSpec>& unit_params(size_t) const override { return specs; }
    at::Tensor forward_unit_with(size_t, const at::Tensor& input, at::TensorList, const Projector&) const override {
      return input;
    }
    const ModelConfig& config() const override { return c; }
    std::vector<ParamSpec> specs;
    ModelConfig c;
  } plain;
  LayerKvCache cache;
  EXPECT_THROW(plain.forward_unit_cached(0, at::zeros({1}), {}, Projector{}, cache), Error);
}

}  // namespace
}  // namespace tierzero::engine
