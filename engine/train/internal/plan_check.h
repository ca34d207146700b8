// Private: the planner's budget check that `train` runs before it allocates anything
// (plan_check.cpp): engine/plan's plan_training() — what `tierzero estimate` prints — on this run's
// model, ds_config and sequence length.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "common/common.h"
#include "engine/config/ds_config.h"
#include "engine/plan/plan.h"

namespace tierzero::engine::trainer {

// Checks the budgets this run sets against the planner's peaks: tierzero.gpu_memory_limit (on a
// GPU, else the GPU's memory; the engine ignores it on the CPU), tierzero.pinned_memory_limit and, with NVMe offload, the
// free space on the nvme_path directories (all ranks of the host), which must exist. The model is
// its HF config.json text (`model_config_json`, named `model_origin` in errors);
// `weights_from_checkpoint` when its weights come from a model directory's safetensors rather than a
// random initialisation (PlanOptions). Returns the plan
// when every budget holds; else kOutOfSpace with the planner's problems — each naming the tier,
// the bytes needed and the budget's key, the largest items and the keys that would fit it — or the
// error of a missing nvme_path directory (kNotFound, naming the key and the directory).
Result<Plan> plan_within_budgets(const std::string& model_config_json, const std::string& model_origin,
                                 const DsConfig& config, int64_t seq_len, at::Device device,
                                 bool weights_from_checkpoint);

}  // namespace tierzero::engine::trainer
