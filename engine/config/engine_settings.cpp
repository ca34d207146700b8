// EngineSettings (ds_config.h): what the ZeRO engine is asked to keep where, and the combinations it
// cannot honour, refused before anything is read or allocated.
#include <string>

#include "cpu_adam/adam.h"
#include "engine/config/ds_config.h"

namespace tierzero::engine {

EngineSettings engine_settings(const DsConfig& config) {
  const Precision precision = config.precision();
  const TierzeroConfig& t = config.tierzero;
  return {.stage = config.zero.stage,
          .compute = precision == Precision::kBf16   ? ElementType::kBF16
                     : precision == Precision::kFp16 ? ElementType::kF16
                                                     : ElementType::kF32,
          .offload_optimizer = config.zero.offload_optimizer.device != OffloadDevice::kNone,
          .state_on_nvme = config.zero.offload_optimizer.device == OffloadDevice::kNvme,
          .offload_params = config.zero.offload_param.device != OffloadDevice::kNone,
          .params_on_nvme = config.param_shard_on_nvme(),
          .grad_staging_buffers = static_cast<int>(config.zero.offload_optimizer.buffer_count),
          .sub_group_size = static_cast<int64_t>(config.zero.sub_group_size),
          .state = t.optimizer_state_dtype == OptimizerStateDtype::kInt8   ? ElementType::kI8
                   : t.optimizer_state_dtype == OptimizerStateDtype::kBf16 ? ElementType::kBF16
                                                                           : ElementType::kF32,
          .compact_master = t.master_weights == MasterWeights::kCompact,
          .offload_grad = t.offload_grad_dtype == OffloadGradDtype::kBf16 ? ElementType::kBF16 : ElementType::kF32,
          .params16_round_away = false,
          .records_in_memory = t.optimizer_records_in_memory,
          .pinned_memory_limit = t.pinned_memory_limit};
}

Status check_engine_settings(const EngineSettings& s, int64_t partition_numel) {
  if (s.stage < 0 || s.stage > 3)
    return invalid_argument("zero_optimization.stage=" + std::to_string(s.stage) + " is not 0, 1, 2 or 3");
  if (s.offload_params && s.stage != 3)
    return invalid_argument("offload_param needs zero_optimization.stage 3 (stage is " + std::to_string(s.stage) +
                            "); set stage 3 or remove offload_param");
  if (s.params_on_nvme && !s.offload_optimizer)
    return invalid_argument(
        "zero_optimization.offload_param.device \"nvme\" needs zero_optimization.offload_optimizer.device \"cpu\" or "
        "\"nvme\" (the CPU optimizer writes the new weights to NVMe); offload the optimizer, or use offload_param "
        "\"cpu\"");
  if (s.offload_optimizer && s.grad_staging_buffers < 1)
    return invalid_argument("grad_staging_buffers=" + std::to_string(s.grad_staging_buffers) +
                            " must be at least 1 (offload_optimizer.buffer_count)");
  if (s.state != ElementType::kF32 && s.state != ElementType::kBF16 && s.state != ElementType::kI8)
    return invalid_argument(std::string("tierzero.optimizer_state_dtype ") + element_type_name(s.state) +
                            " is not supported; use \"fp32\", \"bf16\" or \"int8\"");
  if (s.state != ElementType::kF32 && !s.offload_optimizer)
    return invalid_argument(
        std::string("tierzero.optimizer_state_dtype \"") + (s.state == ElementType::kI8 ? "int8" : "bf16") +
        "\" needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" (the optimizer on the GPU keeps "
        "fp32 state); offload the optimizer or use \"fp32\"");
  if (s.state == ElementType::kI8 && partition_numel > s.sub_group_size &&
      s.sub_group_size % static_cast<int64_t>(cpu_adam::kMomentBlock) != 0)
    return invalid_argument("zero_optimization.sub_group_size=" + std::to_string(s.sub_group_size) +
                            " must be a multiple of " + std::to_string(cpu_adam::kMomentBlock) +
                            " with tierzero.optimizer_state_dtype \"int8\" (8-bit moments are scaled in blocks "
                            "of that many elements); round it to a multiple");
  if (s.compact_master) {
    if (!s.offload_optimizer)
      return invalid_argument(
          "tierzero.master_weights \"compact\" needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" "
          "(the optimizer on the GPU keeps an fp32 master); offload the optimizer or use tierzero.master_weights "
          "\"fp32\"");
    if (s.compute != ElementType::kBF16)
      return invalid_argument(
          std::string("tierzero.master_weights \"compact\" needs bf16 compute weights (its high half is the bf16 "
                      "weights; this run computes in ") +
          element_type_name(s.compute) + "); enable bf16 or use tierzero.master_weights \"fp32\"");
    if (s.params_on_nvme)
      return invalid_argument(
          "tierzero.master_weights \"compact\" with zero_optimization.offload_param.device \"nvme\" is not "
          "supported (the master's high half would have to be read back from the parameter swap each step); use "
          "offload_param \"cpu\" or tierzero.master_weights \"fp32\"");
  }
  if (s.offload_grad != ElementType::kF32 && s.offload_grad != ElementType::kBF16)
    return invalid_argument(std::string("tierzero.offload_grad_dtype ") + element_type_name(s.offload_grad) +
                            " is not supported; use \"fp32\" or \"bf16\"");
  if (s.offload_grad != ElementType::kF32 && !s.offload_optimizer)
    return invalid_argument(
        "tierzero.offload_grad_dtype \"bf16\" needs zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\" "
        "(it is the offloaded optimizer's host gradient partition); offload the optimizer or use \"fp32\"");
  if (s.params16_round_away && (!s.offload_optimizer || s.compute != ElementType::kBF16))
    return invalid_argument(
        "ZeroEngineOptions::params16_rounding kNearestAway needs zero_optimization.offload_optimizer and bf16 compute "
        "weights (it rounds the offloaded optimizer's bf16 weights); leave it kNearestEven");
  if (s.records_in_memory != 0) {
    if (!s.state_on_nvme)
      return invalid_argument(
          "tierzero.optimizer_records_in_memory needs zero_optimization.offload_optimizer.device \"nvme\" (it keeps "
          "some of the NVMe state's sub-group records in pinned memory); remove it or put the state on NVMe");
    if (s.records_in_memory < kOptimizerRecordsAuto)
      return invalid_argument("tierzero.optimizer_records_in_memory=" + std::to_string(s.records_in_memory) +
                              " must be a record count >= 0, or \"auto\" (as many as the pinned budget holds)");
    if (s.records_in_memory == kOptimizerRecordsAuto && s.pinned_memory_limit == 0)
      return invalid_argument(
          "tierzero.optimizer_records_in_memory \"auto\" sizes the records kept in memory by "
          "tierzero.pinned_memory_limit, which is not set; set tierzero.pinned_memory_limit or give a record count");
  }
  return {};
}

}  // namespace tierzero::engine
