// Shared inputs of the planner tests: a Llama 1.35B shape, ds_configs from JSON text, a machine
// with round figures.
#pragma once

#include <cstdint>
#include <string>

#include "engine/plan/plan.h"

namespace tierzero::engine::testing {

// benchmarks/models/llama_1.35b.json: vocab 32000, hidden 2048, intermediate 5504, 24 layers,
// 16 heads (no GQA), untied.
ModelDims llama_1_35b();
// Its parameters, by hand: 2 embeddings + 24 x (4 h^2 + 3 h i + 2 h) + final norm.
constexpr int64_t kLlama135bParams =
    2 * 32000LL * 2048 + 24 * (4LL * 2048 * 2048 + 3LL * 2048 * 5504 + 2 * 2048) + 2048;

// A ds_config parsed from `json_text` for `world` ranks (the test fails on a parse error).
DsConfig config_from(const std::string& json_text, int world = 1);
// Round machine figures (100 TFLOPS x 1.0, 10 GB/s each way, NVMe 1 / 2 GB/s, 1 Gparam/s), no budgets.
Machine round_machine();
// The item of `plan` named `what` in `tier`; 0 bytes when there is none.
uint64_t item_bytes(const Plan& plan, Tier tier, const std::string& what);
// The check named `name`.
const TierCheck& check(const Plan& plan, const std::string& name);

}  // namespace tierzero::engine::testing
