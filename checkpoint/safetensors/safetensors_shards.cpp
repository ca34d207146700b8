// Shard planning and the model.safetensors.index.json of Hugging Face sharded checkpoints.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/safetensors/safetensors.h"

namespace tierzero::checkpoint {

Result<ShardPlan> plan_shards(const std::vector<TensorToWrite>& tensors, uint64_t max_shard_bytes) {
  if (max_shard_bytes == 0) return invalid_argument("--max-shard-size must be at least 1 byte");
  ShardPlan plan;
  uint64_t current_bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TZ_ASSIGN_OR_RETURN(uint64_t bytes, tensors[i].bytes());
    if (plan.shards.empty() || (current_bytes > 0 && current_bytes + bytes > max_shard_bytes)) {
      plan.shards.emplace_back();
      current_bytes = 0;
    }
    plan.shards.back().push_back(i);
    current_bytes += bytes;
    plan.total_bytes += bytes;
  }
  if (plan.shards.empty()) plan.shards.emplace_back();
  const size_t n = plan.shards.size();
  for (size_t s = 0; s < n; ++s) {
    plan.file_names.push_back(n == 1 ? std::string("model.safetensors")
                                     : fmt::format("model-{:05d}-of-{:05d}.safetensors", s + 1, n));
  }
  return plan;
}

std::string build_safetensors_index(const std::vector<TensorToWrite>& tensors, const ShardPlan& plan) {
  if (plan.shards.size() <= 1) return {};
  nlohmann::json weight_map = nlohmann::json::object();  // sorted by name, as transformers writes it
  for (size_t s = 0; s < plan.shards.size(); ++s) {
    for (size_t i : plan.shards[s]) weight_map[tensors[i].name] = plan.file_names[s];
  }
  nlohmann::json index = {{"metadata", {{"total_size", plan.total_bytes}}}, {"weight_map", weight_map}};
  return index.dump(2) + "\n";
}

}  // namespace tierzero::checkpoint
