// plan_training: the sizes, the items, the checks, the time terms, then the advice.
#include <algorithm>
#include <utility>

#include "common/common.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine {
namespace plan {
namespace {

std::vector<MemoryItem> without_cuda_context(std::vector<MemoryItem> items) {
  std::erase_if(items, [](const MemoryItem& i) { return i.what.rfind("CUDA context", 0) == 0; });
  return items;
}

std::vector<TierCheck> checks(const std::vector<MemoryItem>& items, const DsConfig& config, const Machine& machine,
                              const RunShape& s, uint64_t& gpu_allocated) {
  const uint64_t gpu_limit = s.compute_on_cpu ? 0 : config.tierzero.gpu_memory_limit;
  gpu_allocated = peak_bytes(without_cuda_context(items), {Tier::kGpu});
  const uint64_t host = peak_bytes(items, {Tier::kPinned, Tier::kPageable});
  auto source = [](uint64_t budget, const char* name) { return budget > 0 ? std::string(name) : std::string(); };
  return {
      {"gpu", peak_bytes(items, {Tier::kGpu}), machine.gpu_memory_bytes,
       source(machine.gpu_memory_bytes, machine.gpu_memory_source.c_str())},
      {"gpu allocated", gpu_allocated, gpu_limit, source(gpu_limit, "tierzero.gpu_memory_limit")},
      {"pinned", peak_bytes(items, {Tier::kPinned}), config.tierzero.pinned_memory_limit,
       source(config.tierzero.pinned_memory_limit, "tierzero.pinned_memory_limit")},
      {"pageable", peak_bytes(items, {Tier::kPageable}), 0, ""},
      {"host", host * static_cast<uint64_t>(s.world), machine.host_memory_bytes,
       source(machine.host_memory_bytes, machine.host_memory_source.c_str())},
      {"nvme", peak_bytes(items, {Tier::kNvme}) * static_cast<uint64_t>(s.world), machine.nvme_bytes,
       source(machine.nvme_bytes, machine.nvme_source.c_str())},
  };
}

std::vector<std::string> notes(const Machine& machine, const RunShape& s, const DsConfig& config) {
  std::vector<std::string> out;
  std::string defaults;
  const std::pair<const char*, const MachineFigure*> figures[] = {
      {"gpu tflops", &machine.gpu_tflops},      {"pcie h2d", &machine.h2d_gbps},
      {"pcie d2h", &machine.d2h_gbps},          {"nvme read", &machine.nvme_read_gbps},
      {"nvme write", &machine.nvme_write_gbps}, {"cpu adam", &machine.adam_gbps}};
  for (const auto& [name, figure] : figures)
    if (figure->source.rfind("default", 0) == 0) defaults += (defaults.empty() ? "" : ", ") + std::string(name);
  if (!defaults.empty())
    out.push_back("not measured here, the reference GPU box's figures assumed: " + defaults +
                  " (pass tierzero bench pcie|io|adam|tiers --json files with --bench-json)");
  if (s.world > 1) out.push_back("collectives between the ranks (NVLink / network) are not in the time terms");
  if (!s.optimizer_offloaded)
    out.push_back("the optimizer step on the GPU is not in the time terms (HBM-bound, small)");
  if (s.optimizer_offloaded && s.accum > 1 && !s.grads_land_once()) {
    const std::string accumulator = format_bytes(state_layout::accumulator_bytes(s.partition));
    std::string why = s.window_bytes > 0
                          ? "neither the window (+" + format_bytes(static_cast<uint64_t>(s.window_bytes)) +
                                ") nor the fp32 gradient accumulator (+" + accumulator + ") fits"
                          : "the fp32 gradient accumulator (+" + accumulator + ") does not fit";
    out.push_back("gradient accumulation micro-batch by micro-batch: " + why +
                  " the GPU budget, so the gradients cross PCIe " + std::to_string(s.accum) +
                  " times a step" + (s.host_grad_bytes == 2 ? " (in bf16: tierzero.offload_grad_dtype)" : "") +
                  (s.params_offloaded() ? " and each unit is gathered for every forward and backward" : ""));
  }
  if (config.zero.stage == 3)
    out.push_back(
        "stage 3 keeps released parameters whole within stage3_max_reuse_distance: modelled as half "
        "that distance of the units around the turn from forward to backward");
  return out;
}

}  // namespace

Result<Plan> plan_figures(const ModelDims& model, const DsConfig& config, const Machine& machine,
                          const PlanOptions& options, bool* steps_in_backward) {
  TZ_ASSIGN_OR_RETURN(RunShape s, run_shape(model, config, options));
  Plan p;
  p.parameters = s.parameters;
  p.stage = config.zero.stage;
  p.world_size = s.world;
  p.precision = config.precision() == Precision::kBf16   ? "bf16"
                : config.precision() == Precision::kFp16 ? "fp16"
                                                         : "fp32";
  p.optimizer_device = offload_device_name(config.zero.offload_optimizer.device);
  p.param_device =
      offload_device_name(config.zero.stage == 3 ? config.zero.offload_param.device : OffloadDevice::kNone);
  p.optimizer_state =
      s.optimizer_offloaded ? optimizer_state_dtype_name(config.tierzero.optimizer_state_dtype) : "fp32";
  p.master_weights = s.layout.compact_master ? "compact" : "fp32";
  p.offload_grad_dtype = s.host_grad_bytes == 2 ? "bf16" : "fp32";
  p.micro_batch = s.micro;
  p.seq_len = s.seq;
  p.gradient_accumulation_steps = s.accum;
  p.tokens_per_step = s.micro * s.seq * s.accum;
  p.items = memory_items(model, config, s);
  p.gpu_allocated_base_bytes = peak_bytes(without_cuda_context(p.items), {Tier::kGpu});
  for (MemoryItem& item : engine_choice_items(model, config, machine, p.gpu_allocated_base_bytes, s))
    p.items.push_back(std::move(item));
  p.window_group = s.window_group;
  p.kept_layers = s.kept_layers;
  if (s.optimizer_nvme) {
    p.optimizer_records = s.records().count();
    p.optimizer_records_in_memory = s.records_in_memory;
  }
  p.state_bytes = state_bytes_table(s, config);
  p.checks = checks(p.items, config, machine, s, p.gpu_allocated_peak_bytes);
  p.time_terms = time_terms(model, s, machine);
  for (const TimeTerm& t : p.time_terms) {
    p.serial_step_seconds += t.seconds;
    if (t.seconds > p.step_seconds) {
      p.step_seconds = t.seconds;
      p.bottleneck = t.what;
    }
  }
  // The optimizer steps beside the backward, or the forward follows the optimizer step and the backward
  // waits for all of it: that order, when longer than the slowest term.
  const auto [ordered, order] =
      s.steps_in_backward
          ? std::pair(in_backward_step_seconds(p.time_terms),
                      "the forward, then the backward beside the optimizer (forward + max(backward, cpu adam, nvme))")
      : s.follows_step ? std::pair(followed_step_seconds(p.time_terms),
                                   "optimizer step, then the backward (max(forward, cpu adam, nvme) + backward)")
                       : std::pair(0.0, "");
  if (ordered > p.step_seconds) {
    p.step_seconds = ordered;
    p.bottleneck = order;
  }
  p.notes = notes(machine, s, config);
  if (steps_in_backward) *steps_in_backward = s.steps_in_backward;
  return p;
}

const TierCheck& check_named(const Plan& plan, const std::string& name) {
  return *std::find_if(plan.checks.begin(), plan.checks.end(), [&](const TierCheck& c) { return c.name == name; });
}

}  // namespace plan

Result<Plan> plan_training(const ModelDims& model, const DsConfig& config, const Machine& machine,
                           const PlanOptions& options) {
  bool in_backward = false;
  TZ_ASSIGN_OR_RETURN(Plan p, plan::plan_figures(model, config, machine, options, &in_backward));
  p.problems = plan::budget_problems(model, config, machine, options, p);
  // The gradient ring where the optimizer would not step inside the backward: the engine would
  // refuse the first step, after the weights are drawn; `train` runs this plan before.
  // (A ring the config itself refuses, check_engine_settings names.)
  const int64_t ring = config.tierzero.grad_ring_records;
  if (ring > 0 && check_engine_settings(engine_settings(config)).ok() && !in_backward)
    p.problems.push_back("tierzero.grad_ring_records " + std::to_string(ring) +
                         " needs the optimizer stepping inside the backward of a window of "
                         "gradient_accumulation_steps micro-batches run unit by unit, and that window does not "
                         "fit the GPU budget beside the planned peak (the engine would refuse the first step): "
                         "lower train_micro_batch_size_per_gpu or the sequence length, raise "
                         "tierzero.gpu_memory_limit, or set tierzero.grad_ring_records 0");
  return p;
}

}  // namespace tierzero::engine
