// tierzero.lora's plan against figures by hand: the frozen base in its tier once (no gradients, no
// optimizer state), the adapters as the trained parameters, the base's copies over PCIe.
#include <gtest/gtest.h>

#include "plan_fixture.h"
#include "tests/support/status_matchers.h"

namespace tierzero::engine {
namespace {

using testing::config_from;
using testing::item_bytes;
using testing::kLlama135bParams;

constexpr int64_t kHidden = 2048, kInter = 5504, kLayers = 24, kRank = 16;

Plan lora_plan(const std::string& targets, const std::string& offload_param) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
      "bf16": {"enabled": true}, "zero_optimization": {"stage": 3)" + offload_param + R"(},
      "tierzero": {"data": {"seq_len": 16}, "lora": {"r": 16, "lora_alpha": 32, "target_modules": )" + targets + "}}}";
  Result<Plan> p = plan_training(testing::llama_1_35b(), config_from(json), testing::round_machine(), {});
  EXPECT_OK(p);
  return p.ok() ? *p : Plan{};
}

TEST(LoraPlan, AdaptersAreTheTrainedParametersAndTheBaseIsFrozenInItsTier) {
  // q and v of every layer: r x (in + out) each, hidden -> hidden (no GQA).
  const Plan qv = lora_plan(R"(["q_proj", "v_proj"])", R"(, "offload_param": {"device": "cpu", "pin_memory": true})");
  const int64_t adapters = kLayers * 2 * kRank * (kHidden + kHidden);
  EXPECT_EQ(qv.parameters, adapters);
  EXPECT_EQ(item_bytes(qv, Tier::kPinned, "frozen base weights (tierzero.lora)"), 2u * kLlama135bParams);
  EXPECT_EQ(item_bytes(qv, Tier::kGpu, "frozen base weights (tierzero.lora)"), 0u);
  EXPECT_EQ(item_bytes(qv, Tier::kGpu, "optimizer state (fp32 master, m, v)"), 12u * adapters);
  EXPECT_EQ(item_bytes(qv, Tier::kGpu, "gradient partition"), 4u * adapters);
  // Stage 3 with the base offloaded runs the window (unit by unit across the 2 micro-batches): the
  // base crosses PCIe once for the forwards and once for the recomputations, 2 x 2 B x N, beside
  // the adapter shard's gathers (r x (in + out) per target, far smaller), not once per micro-batch.
  EXPECT_GT(item_bytes(qv, Tier::kGpu, "window: other micro-batches' unit inputs, grads"), 0u);
  EXPECT_EQ(item_bytes(qv, Tier::kGpu, "frozen base: the unit in use and the next, copied"),
            2u * 2u * static_cast<uint64_t>(kHidden) * (32000u + 1u));  // the largest: the head unit (norm, lm_head)
  int h2d_terms = 0;
  for (const TimeTerm& term : qv.time_terms) {
    if (term.what != "pcie h2d") continue;
    ++h2d_terms;
    EXPECT_GE(term.seconds, 4.0 * kLlama135bParams / 10e9);
    EXPECT_LT(term.seconds, 4.1 * kLlama135bParams / 10e9);
  }
  EXPECT_EQ(h2d_terms, 1);

  // all-linear, base kept on the GPU: q, k, v, o (h -> h) and gate, up (h -> i), down (i -> h).
  const Plan all = lora_plan(R"("all-linear")", "");
  EXPECT_EQ(all.parameters, kLayers * kRank * (4 * 2 * kHidden + 3 * (kHidden + kInter)));
  EXPECT_EQ(item_bytes(all, Tier::kGpu, "frozen base weights (tierzero.lora)"), 2u * kLlama135bParams);
  EXPECT_EQ(item_bytes(all, Tier::kPinned, "frozen base weights (tierzero.lora)"), 0u);
}

TEST(LoraPlan, BaseOnNvmeIsReadForEachPassAndTheAdaptersStayInHostMemory) {
  const Plan p = lora_plan(R"(["q_proj", "v_proj"])", R"(, "offload_param": {"device": "nvme", "nvme_path": "/tmp"})");
  uint64_t on_nvme = 0;
  for (const MemoryItem& item : p.items)
    if (item.tier == Tier::kNvme) on_nvme += item.bytes;
  // Only the base, in bf16 (the adapters are not on NVMe), in the swap files as the engine writes them
  // (frozen_disk.h): each unit in whole records of 32 MiB. Every unit takes 4: the embedding 131.07 MB,
  // a layer 101.20 MB (2 norms, q, k, v, o of 2048^2 and 3 MLP weights of 2048 x 5504, in bf16), the
  // head unit 131.08 MB. (The plan counted the weights' bytes alone before it sized the files with
  // engine/layout: 2.69 GB of the 3.49 GB the engine preallocates.)
  const uint64_t record = 32u << 20;
  EXPECT_EQ(on_nvme, (1u + kLayers + 1u) * 4u * record);
  EXPECT_EQ(item_bytes(p, Tier::kNvme, "frozen base weights (tierzero.lora)"), on_nvme);
  // Two staging halves of the largest unit's 4 records (the plan counted 2 x the head unit's bytes).
  EXPECT_EQ(item_bytes(p, Tier::kPinned, "frozen base: NVMe staging, 2 units"), 2u * 4u * record);
  // The window (the adapters are offloaded parameters, in host memory): each unit read once for the
  // forwards and once for the backwards, 2 x 2 B x N at the test machine's 1 GB/s, nothing written.
  int nvme_terms = 0;
  for (const TimeTerm& term : p.time_terms) {
    if (term.what != "nvme") continue;
    ++nvme_terms;
    EXPECT_NEAR(term.seconds, 4.0 * kLlama135bParams / 1e9, 1e-6 * kLlama135bParams / 1e9) << term.detail;
  }
  EXPECT_EQ(nvme_terms, 1);
}

// The per-token bytes of one layer's recomputation that the activations item's formula names.
double layer_bytes_per_token(const Plan& plan) {
  for (const MemoryItem& item : plan.items) {
    if (!item.what.starts_with("activations: ") || item.what.find("inputs kept") != std::string::npos) continue;
    const size_t at = item.formula.find("layer ");
    EXPECT_NE(at, std::string::npos) << item.formula;
    return at == std::string::npos ? 0.0 : std::stod(item.formula.substr(at + 6));
  }
  ADD_FAILURE() << "no activations item";
  return 0.0;
}

TEST(LoraPlan, DropoutCountsEachAdaptedInputsCopyAndMaskInTheRecomputedLayer) {
  const Plan plain = lora_plan(R"("all-linear", "lora_dropout": 0.0)", "");
  const Plan dropout = lora_plan(R"("all-linear", "lora_dropout": 0.1)", "");
  // q, k, v, gate, up read the hidden state, o the attention output (hidden wide here), down the MLP's
  // intermediate: (2 B bf16 copy + 1 B mask) per feature. The formula prints 4 significant digits.
  const double features = 6.0 * kHidden + kInter;
  EXPECT_NEAR(layer_bytes_per_token(dropout) - layer_bytes_per_token(plain), 3.0 * features, 0.01 * 3.0 * features);
}

TEST(LoraPlan, TargetsMatchingNothingAreRefused) {
  const DsConfig config = config_from(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3},
      "tierzero": {"data": {"seq_len": 16}, "lora": {"target_modules": ["lm_head"]}}})");
  Result<Plan> p = plan_training(testing::llama_1_35b(), config, testing::round_machine(), {});
  EXPECT_ERROR(p, ErrorCode::kInvalidArgument, "tierzero.lora.target_modules");
}

}  // namespace
}  // namespace tierzero::engine
