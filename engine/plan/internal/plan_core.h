// Private: the steps of plan_training — the run's sizes, the memory items, the checks, the time
// terms (plan_training without the advice), and the advice that re-plans changed configs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/plan/plan.h"
#include "engine/layout/layout.h"

namespace tierzero::engine::plan {

// Sizes every part of the plan reads, per rank. Elements unless named bytes. Its HostShape part
// sizes the offloaded step's pinned buffers and swap files (engine/layout, which the engine
// allocates with): the partition, the landing, the state's layout (tierzero.master_weights and
// optimizer_state_dtype for the offloaded optimizer; fp32 master, m, v on the GPU), the buffers;
// its compute_bytes is e (bf16/fp16 2, fp32 4).
struct RunShape : state_layout::HostShape {
  int world = 1;
  int grad_bytes = 4;  // g: tierzero.grad_accum_dtype (the GPU's gradients)
  int64_t parameters = 0;
  int64_t padded = 0;  // the flat layout's elements (stages 0-2)
  int64_t largest_param = 0;
  int64_t largest_unit = 0;   // a unit's parameters (the LM head unit holds a tied embedding)
  int64_t persistent = 0;     // stage 3: parameters of <= the persistence threshold, whole
  int64_t nonpersistent = 0;  // stage 3: the rest
  int64_t kept_gathered = 0;  // stage 3: parameters kept whole between forward and backward
  // Optimizer on NVMe, set by memory_items (engine/layout's records_in_memory): the records kept in
  // pinned memory, and the bytes a step reads and writes each way, those of the streamed records
  // beyond the buffer_count the swap buffers keep from one pass to the next (none when the step runs
  // inside the backward: engine_choice_items sets that).
  int64_t records_in_memory = 0;
  int64_t nvme_state_moved_bytes = 0;
  // Parameters on NVMe: elements of the shard offload_param.max_in_cpu keeps in pinned memory (whole
  // sub-groups from the front, nvme_params.h).
  int64_t params_in_cpu = 0;
  int64_t micro = 0, seq = 0, accum = 0;
  int64_t reduce_bucket = 0;  // elements of a gradient bucket as the engine cuts them: offloaded on one
                              // rank, at most a staging slot's fp32 elements (zero_engine.cpp)
  // Stage 3 with the offloaded optimizer step running into the next forward (overlap_comm): with
  // more than one micro-batch the forwards may run unit by unit across them (a forward window).
  bool follows_step = false;
  // Stage 3 with the step followed or the parameters offloaded (zero_engine.h window_possible): the
  // window may run when it fits.
  bool window_possible = false;
  // Set by plan_figures from the engine's choices (engine_choice_items): the window runs (window_pass.h),
  // so a step gathers each unit once for all the forwards and once for all the backwards.
  bool forward_window = false;
  // The optimizer steps inside the window's backward (backward_step.h): the window runs, one rank,
  // no gradient clipping, no fp16, parameters not on NVMe. Set with forward_window.
  bool steps_in_backward = false;
  // Set by plan_figures (engine_choice_items): micro-batches are summed in an fp32 accumulator of the
  // partition on the GPU, landing once per step.
  bool device_accumulator = false;
  double window_bytes = 0;  // what the window would add on the GPU (set by engine_choice_items)
  // Micro-batches the window runs as one batch through each decoder layer (tierzero.window_group,
  // resolved by engine_choice_items; 1 when the window does not run).
  int64_t window_group = 1;
  // Decoder layers, the last ones, whose graphs the window keeps instead of recomputing them
  // (tierzero.kept_activations, resolved by engine_choice_items; 0 when the window does not run).
  int64_t kept_layers = 0;
  // tierzero.lora: the engine's parameters above (parameters, partition, units ...) are the
  // adapters; the frozen base's elements and its largest unit are these (functional_model.h, LoRA).
  bool lora = false;
  bool frozen_nvme = false;  // offload_param "nvme": the base in swap files; the adapters as with "cpu"
  int64_t frozen_parameters = 0;
  int64_t frozen_largest_unit = 0;
  std::vector<int64_t> frozen_param_numels;               // each frozen weight, in the model's order
  std::vector<std::vector<int64_t>> frozen_unit_numels;   // each unit's frozen weights (frozen_disk.h)
  // With tierzero.lora.lora_dropout > 0: the input features summed over one layer's adapted
  // projections (the most of any layer), each of which a recomputation drops into a copy.
  int64_t lora_dropout_features = 0;
  // Gradients leave the GPU once per step (one micro-batch, the device accumulator, or the window,
  // whose backwards also run unit by unit: window_pass.h).
  bool grads_land_once() const { return accum < 2 || device_accumulator || forward_window; }
  bool params_cpu = false;
  bool compute_on_cpu = false;  // PlanOptions::compute_on_cpu
  bool weights_from_checkpoint = false;  // PlanOptions::weights_from_checkpoint
  bool params_offloaded() const { return params_cpu || params_nvme; }
};

// The sizes of `config` on `model` (a world_size below 1 taken as 1: the ds_config's reader refuses
// it). kInvalidArgument for a micro-batch, sequence or gradient accumulation below 1.
Result<RunShape> run_shape(const ModelDims& model, const DsConfig& config, const PlanOptions& options);

// Every memory item of one rank (items of 0 bytes left out). Sets shape.records_in_memory and
// shape.nvme_state_moved_bytes.
std::vector<MemoryItem> memory_items(const ModelDims& model, const DsConfig& config, RunShape& shape);

// What the engine adds on the GPU at run time when it finds room beside `planned_gpu_peak` (bytes,
// allocated), decided as zero_engine.cpp decides: an fp32 gradient accumulator of the partition
// (tierzero.offload_grad_accumulator, "auto": the optimizer offloaded, several micro-batches per step
// and room) and, when the window may run (RunShape::window_possible), the forward window's kept unit
// inputs of the other micro-batches. The room is tierzero.gpu_memory_limit, else --gpu-memory, else taken as there.
// Sets shape.forward_window and shape.device_accumulator.
std::vector<MemoryItem> engine_choice_items(const ModelDims& model, const DsConfig& config, const Machine& machine,
                                            uint64_t planned_gpu_peak, RunShape& shape);

// The peak of `tiers` over `items`: resident bytes plus the largest phase.
uint64_t peak_bytes(const std::vector<MemoryItem>& items, const std::vector<Tier>& tiers);

// The check of `plan` named `name` (a plan has every check plan_figures makes: "pinned", "pageable", ...).
const TierCheck& check_named(const Plan& plan, const std::string& name);

// Each resource's busy time for one optimizer step of one rank.
std::vector<TimeTerm> time_terms(const ModelDims& model, const RunShape& shape, const Machine& machine);

// Of gpu compute's FLOPs (8 per matmul parameter and token), the forward's share: 2; the backward
// recomputes (2) and differentiates (4).
inline constexpr double kForwardShare = 0.25;
// The step when the optimizer step follows into the next forward (stage 3, offloaded, overlapped):
// the forward runs behind the optimizer (CPU Adam, its NVMe traffic), and the backward starts only
// once the optimizer has finished (it lands the gradients the optimizer reads):
// max(forward, cpu adam, nvme) + backward, from `terms` (time_terms).
double followed_step_seconds(const std::vector<TimeTerm>& terms);
// The step when the optimizer steps inside the window's backward (RunShape::steps_in_backward): the
// forward, then the backward beside the optimizer: forward + max(backward, cpu adam, nvme).
double in_backward_step_seconds(const std::vector<TimeTerm>& terms);

// plan_training without the problems: sizes, items, checks against `machine` and `config`'s
// limits, time terms, notes. Sets `*steps_in_backward`, when given, to whether the optimizer steps
// inside the window's backward (RunShape::steps_in_backward: the window fits the GPU beside the
// planned peak), which the gradient ring (tierzero.grad_ring_records) needs: without it the engine
// refuses the first step.
Result<Plan> plan_figures(const ModelDims& model, const DsConfig& config, const Machine& machine,
                          const PlanOptions& options, bool* steps_in_backward = nullptr);

// One line per check of `plan` that is over: what, by how much, the largest items, and each key
// that would help, with the figure a re-plan of the changed config gives.
std::vector<std::string> budget_problems(const ModelDims& model, const DsConfig& config, const Machine& machine,
                                         const PlanOptions& options, const Plan& plan);

// The state layout's bytes per parameter of this rank's partition in each tier (Plan::state_bytes).
std::vector<StateBytes> state_bytes_table(const RunShape& shape, const DsConfig& config);

// "1.35e9"-style counts and "12.00 GiB (12884901888 B)"-free short byte text for formulas.
std::string count_text(double count);

}  // namespace tierzero::engine::plan
