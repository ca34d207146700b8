// EngineSettings (ds_config.h): what the ZeRO engine is asked to keep where, and the combinations it
// cannot honour, refused before anything is read or allocated.
#include <sstream>
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
          .gpu_optimizer_share = t.gpu_optimizer_share,
          .pinned_memory_limit = t.pinned_memory_limit,
          .grad_ring_records = t.grad_ring_records,
          .world_size = config.batch.world_size,
          .overlap_comm = config.zero.overlap_comm,
          .gradient_clipping = config.gradient_clipping,
          .gradient_accumulation_steps = config.batch.gradient_accumulation_steps};
}

namespace {

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// The gradient ring's refusals (ds_config.h, check_engine_settings). Every value here is final once
// the config is parsed ("auto" gradient_clipping and gradient_accumulation_steps are filled from the
// trainer's flags or refused by then). What waits for the engine: the slot count (the records a
// unit spans until final: the model's parameters, backward_step.h) and whether the window fits the
// GPU (the model's activations and the device's room: the plan names it where the GPU budget is
// known, before any weight is drawn; the engine refuses the first step otherwise).
Status check_grad_ring(const EngineSettings& s) {
  const std::string ring = "tierzero.grad_ring_records " + std::to_string(s.grad_ring_records);
  const std::string or_zero = ", or set tierzero.grad_ring_records 0 (the whole gradient partition)";
  if (s.grad_ring_records < 0) return invalid_argument(ring + " must be a slot count >= 0" + or_zero);
  if (!s.offload_optimizer)
    return invalid_argument(ring +
                            " holds the offloaded optimizer's host gradients: set "
                            "zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\"" +
                            or_zero);
  // The optimizer steps inside the backward only where engine/layout's step_in_backward_refusal
  // allows it (the planner and the engine decide with it), with the step followed (overlap_comm).
  const std::string needs = ring + " needs the optimizer stepping inside the window's backward, which ";
  if (s.stage != 3)
    return invalid_argument(needs + "needs zero_optimization.stage 3 (it is " + std::to_string(s.stage) +
                            "): set stage 3" + or_zero);
  if (s.world_size != 1)
    return invalid_argument(needs + "needs one rank (this run has " + std::to_string(s.world_size) +
                            "): run on one GPU" + or_zero);
  if (!s.overlap_comm)
    return invalid_argument(needs + "needs zero_optimization.overlap_comm true (it is false): set it true" + or_zero);
  if (s.params_on_nvme)
    return invalid_argument(needs +
                            "needs the parameters off NVMe (zero_optimization.offload_param.device "
                            "\"nvme\" reads and writes them through the same buffers): use "
                            "offload_param \"cpu\"" +
                            or_zero);
  if (s.gradient_clipping > 0.0)
    return invalid_argument(needs + "needs gradient_clipping 0 (it is " + number_text(s.gradient_clipping) +
                            ": clipping needs the whole gradient's norm before the first update): set "
                            "gradient_clipping 0" +
                            or_zero);
  if (s.compute == ElementType::kF16)
    return invalid_argument(needs +
                            "needs bf16 or fp32 compute (fp16's overflow check needs the whole gradient "
                            "before the first update): enable bf16 instead of fp16" +
                            or_zero);
  if (s.gradient_accumulation_steps < 2)
    return invalid_argument(needs + "needs gradient_accumulation_steps >= 2 (it is " +
                            std::to_string(s.gradient_accumulation_steps) +
                            "; the window of micro-batches the optimizer steps inside): raise it" + or_zero);
  return {};
}

}  // namespace

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
  if (s.gpu_optimizer_share != 0.0) {
    const std::string share = "tierzero.gpu_optimizer_share " + number_text(s.gpu_optimizer_share);
    if (!(s.gpu_optimizer_share > 0.0 && s.gpu_optimizer_share < 1.0))
      return invalid_argument(share +
                              " must be in [0, 1) (the share of the optimizer's elements the GPU steps; 0: "
                              "the CPU steps them all)");
    if (!s.offload_optimizer)
      return invalid_argument(share +
                              " shares the offloaded optimizer's step with the GPU: set "
                              "zero_optimization.offload_optimizer.device \"cpu\" or \"nvme\", or the share 0");
    if (!s.compact_master)
      return invalid_argument(share +
                              " needs tierzero.master_weights \"compact\" (the GPU steps the compact master, "
                              "bit for bit the CPU kernel; an fp32 master it does not step): set it, or the share 0");
  }
  if (s.grad_ring_records != 0) return check_grad_ring(s);
  return {};
}

}  // namespace tierzero::engine
