#include "engine/train/internal/plan_check.h"

#include <vector>

#include "engine/plan/plan.h"
#include "offload/torch/offload_torch.h"

namespace tierzero::engine::trainer {
namespace {

// The free NVMe bytes the run may fill: each offload block's directories must exist (checked under
// its own key); the total counts each file system once.
Result<uint64_t> nvme_budget(const DsConfig& config) {
  const ZeroConfig& z = config.zero;
  if (z.offload_optimizer.device == OffloadDevice::kNvme)
    TZ_RETURN_IF_ERROR(
        nvme_free_bytes(z.offload_optimizer.nvme_paths, "zero_optimization.offload_optimizer.nvme_path").status());
  if (z.offload_param.device == OffloadDevice::kNvme)
    TZ_RETURN_IF_ERROR(
        nvme_free_bytes(z.offload_param.nvme_paths, "zero_optimization.offload_param.nvme_path").status());
  return nvme_free_bytes(config_nvme_paths(config), "nvme_path");
}

}  // namespace

Result<Plan> plan_within_budgets(const std::string& model_config_json, const std::string& model_origin,
                                 const DsConfig& config, int64_t seq_len, at::Device device,
                                 bool weights_from_checkpoint) {
  TZ_ASSIGN_OR_RETURN(ModelDims model, parse_model_dims(model_config_json, model_origin));
  Machine machine = default_machine();  // no --gpu-memory / --host-memory here: the config's budgets
  // On a GPU without tierzero.gpu_memory_limit, the device's memory: the budget the engine's own room
  // takes and `estimate` on this machine checks, which the plan's "auto" choices (window groups, kept
  // layers) must fit.
  if (device.is_cuda() && config.tierzero.gpu_memory_limit == 0) {
    machine.gpu_memory_bytes = offload::device_memory_bytes(device);
    machine.gpu_memory_source = device.str() + "'s memory";
  }
  if (!config_nvme_paths(config).empty()) {
    TZ_ASSIGN_OR_RETURN(machine.nvme_bytes, nvme_budget(config));
  }
  TZ_ASSIGN_OR_RETURN(Plan plan, plan_training(model, config, machine,
                                               PlanOptions{.seq_len = seq_len,
                                                           .compute_on_cpu = device.is_cpu(),
                                                           .weights_from_checkpoint = weights_from_checkpoint}));
  if (plan.feasible()) return plan;
  std::string message = "this run does not fit its budgets (the plan `tierzero estimate` prints for this config):";
  for (const std::string& problem : plan.problems) message += "\n- " + problem;
  return out_of_space(message);
}

}  // namespace tierzero::engine::trainer
