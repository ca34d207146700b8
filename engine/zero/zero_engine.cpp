#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "engine/config/ds_config.h"
#include "engine/layout/layout.h"
#include "engine/zero/internal/followed_step.h"
#include "engine/zero/internal/forward_window.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/host_grad_pipeline.h"
#include "engine/zero/internal/offload_stack.h"
#include "engine/zero/internal/offloaded_grads.h"
#include "engine/zero/internal/param_loading.h"
#include "engine/zero/internal/unit_function.h"
#include "engine/zero/internal/window_pass.h"

namespace tierzero::engine {
namespace {

using Clock = std::chrono::steady_clock;

// The fp32 bytes of master weights from which the start-up shows their reads on a progress bar
// (about a second's draws or reads on a few cores).
constexpr uint64_t kStartupBarBytes = uint64_t{2} << 30;

// With the time breakdown on (`timed`): waits for the device's current stream, then adds the wall
// time since `start` to `phase`.
void add_device_time(bool timed, at::Device device, double& phase, Clock::time_point start) {
  if (!timed) return;
  sync_current_stream(device);
  phase += seconds_since(start);
}

bool is_16bit(at::ScalarType type) { return type == at::kBFloat16 || type == at::kHalf; }

// A scalar that requires grad, for run_unit: it puts unit 0 in the micro-batch's graph.
at::Tensor new_anchor(at::Device device) {
  return at::ones({}, at::TensorOptions().dtype(at::kFloat).device(device)).requires_grad_(true);
}

// This rank's partition and the largest reduced bucket it can land (elements), from the layouts.
struct PartitionSizes {
  int64_t partition_numel = 0;
  int64_t landing_numel = 0;
};

PartitionSizes partition_sizes(const FunctionalModel& model, const PartitionOptions& options, int world_size) {
  const std::vector<ParamSpec> params = all_params(model);
  int64_t partition = 0, slots = 0, largest = 0;  // slots: stage 3's, each padded by an element
  if (options.stage == 3) {
    const ShardedLayout layout = make_sharded_layout(params, world_size);
    for (const ShardSlot& slot : layout.slots) largest = std::max(largest, slot.shard_numel);
    partition = layout.shard_numel;
    slots = static_cast<int64_t>(layout.slots.size());
  } else {
    const FlatGroupLayout layout = make_flat_group_layout(params, options.stage, world_size);
    for (const FlatSlot& slot : layout.slots) largest = std::max(largest, slot.numel);
    partition = layout.partition_numel;
  }
  return {.partition_numel = partition,
          .landing_numel = state_layout::landing_numel(options.stage, partition, options.reduce_bucket_numel,
                                                       world_size, slots, largest)};
}

bool state_on_nvme(const ZeroEngineOptions& options) {
  return options.offload_optimizer && !options.nvme_optimizer.paths.empty();
}

bool params_on_nvme(const ZeroEngineOptions& options) {
  return options.partition.offload_params && !options.nvme_params.paths.empty();
}

bool compact_master(const ZeroEngineOptions& options) { return options.master_layout == MasterLayout::kCompact; }
bool moments_8bit(const ZeroEngineOptions& options) { return options.optimizer_state_dtype == at::kChar; }
// Whether the bf16 compute weights are the master rounded to nearest with ties away from zero (a
// compact master's high half, or the fp32 master with params16_rounding kNearestAway), not as
// Tensor::copy_ casts: then the engine writes them so at the start and after a load as well. Either
// needs the offloaded optimizer and bf16 compute (check_engine_settings).
bool rounds_away(const ZeroEngineOptions& options) {
  return compact_master(options) || options.params16_rounding == cpu_adam::Bf16Rounding::kNearestAway;
}

// What sizes this rank's pinned buffers and swap files (engine/layout, which the planner sizes them
// with too).
state_layout::HostShape host_shape(const ZeroEngineOptions& options, const PartitionSizes& sizes, at::Device device) {
  const PartitionOptions& partition = options.partition;
  return {.partition = sizes.partition_numel,
          .landing = sizes.landing_numel,
          .sub_group_size = options.sub_group_size,
          .layout = record_layout(options.optimizer_state_dtype, compact_master(options)),
          .optimizer_offloaded = options.offload_optimizer,
          .optimizer_nvme = state_on_nvme(options),
          .optimizer_buffers = options.nvme_optimizer.buffer_count,
          .staging_slots = options.grad_staging_buffers,
          .staging_slot_bytes = options.grad_staging_slot_bytes,
          .host_grad_bytes = static_cast<int>(c10::elementSize(options.offload_grad_dtype)),
          .grad_ring_records = options.offload_optimizer ? options.grad_ring_records : 0,
          .compute_bytes = static_cast<int>(c10::elementSize(partition.compute_dtype)),
          .weights16_for_device = is_16bit(partition.compute_dtype) && !device.is_cpu() && !partition.offload_params,
          .params_nvme = params_on_nvme(options),
          .param_buffers = options.nvme_params.buffer_count,
          .param_buffer_numel = options.nvme_params.buffer_numel,
          .params_max_in_cpu = options.nvme_params.max_in_cpu,
          .params_pinned = partition.offload_params && partition.pin_offloaded_params,
          .gpu_optimizer_share = options.offload_optimizer ? options.gpu_optimizer_share : 0.0};
}

// The 16-bit weights bound for the device (empty when the compute partition is in host memory).
at::Tensor weights16(const ZeroEngineOptions& options, const HostTier& host_tier) {
  return host_tier.buffer(PinnedRole::kWeights16, options.partition.compute_dtype);
}

// Whether the compact master's high half is the offloaded parameter shard itself (compact_state's
// choice: no 16-bit weights bound for the device), which the optimizer's first split writes whole,
// so the partitioner need not read the weights into it first (OffloadedHost::shard_from_master). A
// compact master has the optimizer offloaded and no parameters on NVMe (check_engine_settings).
bool shard_is_master_half(const ZeroEngineOptions& options, const HostTier* host_tier) {
  return compact_master(options) && options.partition.stage == 3 && host_tier != nullptr &&
         weights16(options, *host_tier).numel() == 0;
}

// Why the offloaded optimizer, where its step follows into the next forward (overlap_offload and
// `partitioner` can_follow_step()), cannot step inside the window's backward, or nullptr when it can
// (state_layout::step_in_backward_refusal, which the planner decides with too).
const char* backward_step_refusal(const ZeroEngineOptions& options, const Partitioner& partitioner) {
  return state_layout::step_in_backward_refusal(partitioner.can_hand_over_grads(), params_on_nvme(options),
                                                options.gradient_clipping,
                                                options.partition.compute_dtype == at::kHalf);
}

// `options` as engine/config's settings, which check_engine_settings() checks (the options may be
// set without a ds_config). kInvalidArgument naming `key` for a dtype tierzero has no name for.
ElementType settings_type(at::ScalarType type, const char* key) {
  if (const std::optional<ElementType> element = to_element_type(type)) return *element;
  throw Error(invalid_argument(std::string(key) + " " + c10::toString(type) + " is not supported"));
}
EngineSettings settings_of(const ZeroEngineOptions& options, int world_size) {
  static_assert(kRecordsByBudget == kOptimizerRecordsAuto, "records_in_memory carries \"auto\" as is");
  return {.stage = options.partition.stage,
          .compute = settings_type(options.partition.compute_dtype, "PartitionOptions::compute_dtype"),
          .offload_optimizer = options.offload_optimizer,
          .state_on_nvme = state_on_nvme(options),
          .offload_params = options.partition.offload_params,
          .params_on_nvme = params_on_nvme(options),
          .grad_staging_buffers = options.grad_staging_buffers,
          .sub_group_size = options.sub_group_size,
          .state = settings_type(options.optimizer_state_dtype, "tierzero.optimizer_state_dtype"),
          .compact_master = compact_master(options),
          .offload_grad = settings_type(options.offload_grad_dtype, "tierzero.offload_grad_dtype"),
          .params16_round_away = options.params16_rounding == cpu_adam::Bf16Rounding::kNearestAway,
          .records_in_memory = options.optimizer_records_in_memory,
          .gpu_optimizer_share = options.gpu_optimizer_share,
          .pinned_memory_limit = options.pinned_memory_limit_bytes,
          .grad_ring_records = options.grad_ring_records,
          .world_size = world_size,
          .overlap_comm = options.overlap_offload,
          .gradient_clipping = options.gradient_clipping,
          .gradient_accumulation_steps = options.gradient_accumulation_steps};
}

// The optimizer's GPU share (tierzero.gpu_optimizer_share), or null for share 0: its device slots
// (engine/layout's, which the planner counts) allocated now, before step 1. Throws tierzero::Error
// (kInvalidArgument naming the key and the fix) for a CPU device without options.gpu_share_kernel,
// and for a CPU whose SIMD target rounds multiply-adds apart: its bytes would not be the device's.
std::unique_ptr<DeviceShare> make_device_share(const ZeroEngineOptions& options, const state_layout::HostShape& shape,
                                               DeviceCopies& copies) {
  const at::Device device = copies.device();
  if (shape.gpu_optimizer_share <= 0) return nullptr;
  DeviceKernel kernel = options.gpu_share_kernel;
  if (!kernel) {
    if (!device.is_cuda() || cpu_adam::cuda_device_count() == 0)
      throw Error(
          invalid_argument("tierzero.gpu_optimizer_share needs a CUDA device to step on (this run computes on " +
                           device.str() + "); set it to 0"));
    if (cpu_adam::simd_target_mul_add() != cpu_adam::MulAddRounding::kFused)
      throw Error(invalid_argument(
          "tierzero.gpu_optimizer_share: this CPU's SIMD target (" + cpu_adam::simd_target_name() +
          ") rounds a multiply-add twice and the GPU once, so the two would not step the same bits; set it to 0"));
    kernel = cpu_adam::step_on_gpu;
  }
  return std::make_unique<DeviceShare>(
      DeviceShareSetup{.share = shape.gpu_optimizer_share,
                       .copies = &copies,
                       .layout = shape.layout,
                       .grads = settings_type(options.offload_grad_dtype, "tierzero.offload_grad_dtype"),
                       .chunk = state_layout::gpu_share_chunk(shape.records()),
                       .kernel = std::move(kernel)});
}

// The compact layouts the options ask for; a compact master's high half is the bf16 weights the
// optimizer writes: bound for the device ("16-bit weights"), or the host compute partition itself.
CompactState compact_state(const ZeroEngineOptions& options, const HostTier& host_tier, Partitioner& partitioner) {
  CompactState compact{.compact_master = compact_master(options), .moments_8bit = moments_8bit(options), .hi = {}};
  // The bf16 weights the optimizer writes: in place in host memory, or bound for the device.
  if (compact.compact_master) {
    const at::Tensor staged = weights16(options, host_tier);
    compact.hi = staged.numel() > 0 ? staged : partitioner.compute_partition();
    if (!compact.hi.is_cpu() || !compact.hi.is_contiguous() || compact.hi.scalar_type() != at::kBFloat16)
      throw Error(internal_error("compact master: no bf16 weights in host memory for its high half"));
  }
  return compact;
}

// The GPU room the accumulator and the forward window are decided in (engine/layout, which the
// planner decides with too), and the text naming its budget for the choice's sentence.
state_layout::GpuRoom gpu_room(const ZeroEngineOptions& options, at::Device device) {
  const uint64_t limit = options.gpu_memory_limit_bytes;
  return {.on_gpu = device.is_cuda(),
          .budget = !device.is_cuda() ? 0
                    : limit > 0       ? limit
                                      : device_memory_bytes(device),
          .planned_peak = options.planned_gpu_peak_bytes};
}
std::string budget_text(const ZeroEngineOptions& options, const state_layout::GpuRoom& room, at::Device device) {
  return format_bytes(room.budget) +
         (options.gpu_memory_limit_bytes > 0 ? " (tierzero.gpu_memory_limit)" : " (" + device.str() + "'s memory)");
}

// Whether the offloaded step accumulates micro-batches on `device` (engine/layout's choice), and the
// sentence saying why.
std::pair<bool, std::string> choose_grad_accumulator(const ZeroEngineOptions& options, int64_t partition_numel,
                                                     at::Device device) {
  using state_layout::AccumulatorReason;
  const state_layout::GpuRoom room = gpu_room(options, device);
  const state_layout::AccumulatorChoice choice = state_layout::grad_accumulator(
      options.grad_accumulator, options.gradient_accumulation_steps, partition_numel, room);
  const uint64_t bytes = state_layout::accumulator_bytes(partition_numel);
  const std::string held = format_bytes(bytes) + " fp32 on " + device.str();
  switch (choice.why) {
    case AccumulatorReason::kAsked:
      return {choice.on_device, choice.on_device ? "device (" + held + "; tierzero.offload_grad_accumulator \"device\")"
                                                 : "host (tierzero.offload_grad_accumulator \"host\")"};
    case AccumulatorReason::kOneMicroBatch: return {false, "host (one micro-batch per step: nothing to accumulate)"};
    case AccumulatorReason::kNoGpu: return {false, "host (no GPU to accumulate on)"};
    case AccumulatorReason::kRoom: break;
  }
  const bool fits = choice.on_device;
  const std::string where = fits ? "device (" : "host (";
  if (room.planned_peak > 0)
    return {fits, where + held + ": planned peak " + format_bytes(room.planned_peak) + " + " + format_bytes(bytes) +
                      (fits ? " fits " : " exceeds ") + budget_text(options, room, device) + ")"};
  return {fits, where + held + (fits ? " is within" : " exceeds") + " a quarter of " +
                    budget_text(options, room, device) + "; no planned peak)"};
}

// Splits the constructor's time into EngineStartup's phases: end(phase) adds the wall time since the
// previous end, less the weights' reads in it (added to weights_s), to `phase`; the destructor ends
// the last one, optimizer_s, wherever the constructor returns.
class StartupPhases {
 public:
  StartupPhases(const TimedParamSource& reads, EngineStartup& out) : reads_(reads), out_(out) {}
  StartupPhases(const StartupPhases&) = delete;
  StartupPhases& operator=(const StartupPhases&) = delete;
  ~StartupPhases() { end(&EngineStartup::optimizer_s); }
  void end(double EngineStartup::*phase) {
    const auto now = std::chrono::steady_clock::now();
    const double reads = reads_.seconds() - reads_before_;
    out_.*phase += std::chrono::duration<double>(now - start_).count() - reads;
    out_.weights_s += reads;
    out_.weights_cpu_s = reads_.cpu_seconds();
    out_.weight_bytes = reads_.bytes();
    reads_before_ = reads_.seconds();
    start_ = now;
  }

 private:
  const TimedParamSource& reads_;
  EngineStartup& out_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double reads_before_ = 0.0;
};

}  // namespace

ZeroEngine::ZeroEngine(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params,
                       const ZeroEngineOptions& options, Comm& comm)
    : ZeroEngine(model, *map_param_source(params), options, comm) {}

ZeroEngine::ZeroEngine(const FunctionalModel& model, ParamSource& source, const ZeroEngineOptions& options, Comm& comm)
    : model_(model), comm_(comm), options_(options) {
  TimedParamSource params(source);
  StartupPhases phases(params, startup_);  // the last phase, optimizer_s, ends with the constructor
  throw_if_error(check_params(model, params));
  // Refused before the device is touched; the check that needs the partition's size follows it.
  throw_if_error(check_engine_settings(settings_of(options, comm.world_size())));
  throw_if_error(limit_device_memory(comm.device(), options.gpu_memory_limit_bytes));
  // The same buckets for both accumulators, which keeps them equal bit for bit.
  options_.partition.reduce_bucket_numel =
      state_layout::reduce_bucket_numel(options.partition.reduce_bucket_numel, options.offload_optimizer,
                                        comm.world_size(), options.grad_staging_slot_bytes);

  const PartitionSizes sizes = partition_sizes(model, options_.partition, comm.world_size());
  throw_if_error(check_engine_settings(settings_of(options_, comm.world_size()), sizes.partition_numel));
  const state_layout::HostShape shape = host_shape(options_, sizes, comm.device());
  if (params_on_nvme(options_)) {  // before the pinned buffers and the swap files are made
    throw_if_error(check_read_buffers(make_sharded_layout(all_params(model), comm.world_size()),
                                      unit_param_indices(model), options_.partition.persistence_threshold,
                                      shape.records().group(), options_.nvme_params, comm.rank()));
  }
  const int64_t records_in_memory =
      state_layout::records_in_memory(shape, options_.optimizer_records_in_memory, options_.pinned_memory_limit_bytes);
  const std::vector<offload::PinnedBufferSpec> buffers = state_layout::pinned_buffers(shape, records_in_memory);
  phases.end(&EngineStartup::setup_s);
  if (!buffers.empty())
    host_tier_ = HostTier::create(buffers, options.pinned_memory_limit_bytes, comm.device(), comm.rank());
  phases.end(&EngineStartup::pinned_s);
  if (options.offload_optimizer || options.partition.offload_params)
    copies_ = DeviceCopies::create(comm.device(), options.time_breakdown);
  if (params_on_nvme(options)) {
    NvmeParamsSetup setup{.options = options.nvme_params,
                          .rank = comm.rank(),
                          .shard_numel = sizes.partition_numel,
                          .record_numel = shape.records().group(),
                          .dtype = options.partition.compute_dtype,
                          .read_buffers = {},
                          .windows = {},
                          .host_records = {}};
    for (int i = 0; i < options.nvme_params.buffer_count; ++i)
      setup.read_buffers.push_back(host_tier_->buffer(PinnedRole::kParamReadBuffer, at::kByte, i));
    for (int i = 0; i < 2; ++i) setup.windows.push_back(host_tier_->buffer(PinnedRole::kParamWindow, at::kByte, i));
    setup.host_records = host_tier_->buffer(PinnedRole::kParamRecords, options.partition.compute_dtype);
    nvme_params_ = NvmeParams::create(std::move(setup));
  }
  if (options.offload_optimizer) {
    cpu_adam_ = std::make_unique<cpu_adam::CpuAdam>(cpu_adam::CpuAdamOptions{.threads = options.cpu_threads});
    device_share_ = make_device_share(options_, shape, *copies_);
    std::vector<at::Tensor> staging;
    for (int i = 0; i < options.grad_staging_buffers; ++i)
      staging.push_back(host_tier_->buffer(PinnedRole::kGradStaging, at::kByte, i));
    GradLanding landing;  // the whole partition, or the gradient ring (engine/layout lists either)
    for (int64_t i = 0; i < shape.grad_ring_records; ++i)
      landing.ring.push_back(
          host_tier_->buffer(PinnedRole::kGradients, options.offload_grad_dtype, static_cast<int>(i)));
    landing.record_numel = shape.records().group();
    landing.numel = sizes.partition_numel;
    if (landing.ring.empty())
      landing.partition = host_tier_->buffer(PinnedRole::kGradients, options.offload_grad_dtype);
    grad_pipeline_ =
        std::make_unique<HostGradPipeline>(std::move(landing), std::move(staging), *copies_, *cpu_adam_,
                                           1.0f / static_cast<float>(comm.world_size()), options.overlap_offload);
    bool on_device = false;
    std::tie(on_device, grad_accumulator_choice_) =
        choose_grad_accumulator(options, sizes.partition_numel, comm.device());
    at::Tensor accumulator;
    if (on_device)
      accumulator = at::zeros({sizes.partition_numel}, at::TensorOptions().dtype(at::kFloat).device(comm.device()));
    offloaded_grads_ = std::make_unique<OffloadedGrads>(*grad_pipeline_, std::move(accumulator));
  }
  phases.end(&EngineStartup::setup_s);
  partitioner_ = make_partitioner(model, params, options_.partition, comm,
                                  OffloadedHost{.grads = offloaded_grads_.get(),
                                                .tier = host_tier_.get(),
                                                .copies = copies_.get(),
                                                .nvme_params = nvme_params_.get(),
                                                .shard_from_master = shard_is_master_half(options_, host_tier_.get())});
  phases.end(&EngineStartup::params_s);
  if (nvme_params_ != nullptr) (void)nvme_params_->take_traffic();  // the initial writes are not a step's
  const int partition_rank = partitioner_->partitioned() ? comm.rank() : 0;
  // The master's reads on a bar where they may take seconds (rank 0's; the others read as much).
  const uint64_t master_bytes = sizeof(float) * partition_param_numel(model, *partitioner_, partition_rank);
  if (comm.rank() == 0 && master_bytes >= kStartupBarBytes)
    params.show_progress("start-up: master weights", master_bytes);
  if (!options.offload_optimizer) {
    at::Tensor master =
        at::zeros({partitioner_->partition_numel()}, at::TensorOptions().dtype(at::kFloat).device(comm.device()));
    load_partition_range(params, model, *partitioner_, partition_rank, 0, master);
    optimizer_ = make_device_adam(std::move(master), options.adam);
    choose_step_modes();
    return;
  }
  // The record optimizer: with device "nvme" its records on NVMe (some kept in memory), with "cpu"
  // (no nvme_path) every record in memory and no swap file.
  RecordAdamSetup setup{.config = options.adam,
                        .adam = cpu_adam_.get(),
                        .copies = copies_.get(),
                        .sub_group_numel = options.sub_group_size,
                        .time_copies = options.time_breakdown,
                        .params16 = weights16(options, *host_tier_),
                        .sink = nvme_params_.get(),
                        .compact = compact_state(options, *host_tier_, *partitioner_),
                        .params16_rounding = options.params16_rounding,
                        .device_share = device_share_.get(),
                        .rank = comm.rank(),
                        .state_dtype = options.optimizer_state_dtype,
                        .records_in_memory = records_in_memory,
                        .memory_records = host_tier_->buffer(PinnedRole::kOptimizerRecords, at::kByte),
                        // where the step may run inside the backward (choose_step_modes)
                        .spread_records = options.overlap_offload && partitioner_->can_follow_step() &&
                                          backward_step_refusal(options, *partitioner_) == nullptr,
                        .nvme = options.nvme_optimizer,
                        .buffers = {},
                        .numel = partitioner_->partition_numel(),
                        .load_master = [&](int64_t begin, const at::Tensor& out) {
                          load_partition_range(params, model, *partitioner_, partition_rank, begin, out);
                        }};
  for (int i = 0; state_on_nvme(options) && i < options.nvme_optimizer.buffer_count; ++i)
    setup.buffers.push_back(host_tier_->buffer(PinnedRole::kOptimizerSwapBuffer, at::kByte, i));
  const CompactState compact = setup.compact;
  optimizer_ = make_record_adam(std::move(setup));
  update_nvme_traffic();  // the swap files' size
  // The weights as the master's bf16 half rounds them: copied from the master, unless that half is
  // the compute partition itself (offloaded parameters in host memory), which the master's first
  // split wrote; its persistent parameters are gathered from it either way.
  if (rounds_away(options)) {
    const at::Tensor compute = partitioner_->compute_partition();
    if (compact.compact_master && compute.defined() && compact.hi.data_ptr() == compute.data_ptr())
      partitioner_->publish_compute_partition();
    else
      sync_compute_params();
  }
  choose_step_modes();
}

void ZeroEngine::check_grad_ring() const {
  if (!grad_pipeline_ || !grad_pipeline_->lands_in_ring()) return;
  const std::string key = "tierzero.grad_ring_records " + std::to_string(options_.grad_ring_records);
  // check_engine_settings refused, from the settings alone, every ring whose optimizer cannot step
  // inside the backward; the slot count is what needs the model.
  if (backward_step_ == nullptr)
    throw Error(internal_error(key + ": the optimizer steps " +
                               (backward_step_choice_.empty() ? "after the backward" : backward_step_choice_) +
                               ", which check_engine_settings should have refused"));
  const int64_t needed = grad_ring_records_needed(model_, *partitioner_, grad_pipeline_->record_numel());
  if (options_.grad_ring_records < needed)
    throw Error(invalid_argument(key + " is too few: the backward holds up to " + std::to_string(needed) +
                                 " records' gradients before the optimizer may read one (the records a unit spans "
                                 "until it is final); set it to at least " +
                                 std::to_string(needed)));
}

void ZeroEngine::refuse_unless_ring_fed(bool steps_in_backward, const char* what) const {
  if (steps_in_backward || !grad_pipeline_ || !grad_pipeline_->lands_in_ring()) return;
  throw Error(invalid_argument(
      std::string(what) + " with tierzero.grad_ring_records " + std::to_string(options_.grad_ring_records) +
      ": the gradient ring holds a few records, not the whole gradient, so every step must run as one window of "
      "gradient_accumulation_steps micro-batches (queue_window, unit by unit) after plan_step, the optimizer "
      "reading each record inside the backward. Set tierzero.grad_ring_records to 0 for this use"));
}

void ZeroEngine::choose_step_modes() {
  // Step timing: after the backward, or followed into the next forward and, where it can, inside the
  // window's backward.
  if (options_.offload_optimizer && options_.overlap_offload && partitioner_->can_follow_step()) {
    step_in_backward_if_possible();
    followed_step_ = std::make_unique<FollowedStep>(*partitioner_, *optimizer_, *copies_, options_.time_breakdown);
  }
  // Forward shape: the window's size is known up front when the micro-batch's tokens are.
  const state_layout::GpuRoom room = gpu_room(options_, comm_.device());
  window_ = std::make_unique<ForwardWindow>(
      model_, options_.partition.compute_dtype,
      partitioner_->can_follow_step() && (followed_step_ != nullptr || options_.partition.offload_params),
      grad_accumulation_on_device() ? state_layout::accumulator_bytes(partitioner_->partition_numel()) : 0, room,
      budget_text(options_, room, comm_.device()), options_.window_group, options_.kept_layers);
  if (options_.micro_batch_tokens > 0)
    window_->decide(options_.gradient_accumulation_steps, options_.micro_batch_tokens);
  check_grad_ring();  // the last step of construction: the modes it needs are chosen
}

void ZeroEngine::step_in_backward_if_possible() {
  const char* why_not = backward_step_refusal(options_, *partitioner_);
  if (why_not != nullptr) {
    backward_step_choice_ =
        std::string("after the backward, into the next forward (not inside the backward: ") + why_not + ")";
    return;
  }
  backward_step_ = std::make_unique<BackwardStep>(model_, *partitioner_, *grad_pipeline_);
  backward_step_choice_ =
      "inside the backward when the window runs unit by unit (each sub-group once its gradients have landed, last to "
      "first; no gradient clipping)";
}

void ZeroEngine::plan_step(double lr, double loss_scale) { planned_step_ = std::make_pair(lr, loss_scale); }

ZeroEngine::~ZeroEngine() = default;  // a step still in flight is joined; its errors reach no one now

double ZeroEngine::forward_backward(const at::Tensor& input_ids, const at::Tensor& targets, double loss_multiplier) {
  return queue_forward_backward(input_ids, targets, loss_multiplier).item<double>();
}

at::Tensor ZeroEngine::queue_forward_backward(const at::Tensor& input_ids, const at::Tensor& targets,
                                              double loss_multiplier) {
  const at::Device device = comm_.device();
  refuse_unless_ring_fed(
      false, "a micro-batch's backward on its own (forward_backward, or a window run micro-batch by micro-batch)");
  const Clock::time_point start = Clock::now();
  if (options_.time_breakdown) sync_current_stream(device);
  const at::Tensor anchor = new_anchor(device);
  at::Tensor hidden = offload::inputs_to_device(input_ids, device);
  for (size_t unit = 0; unit + 1 < model_.num_units(); ++unit)
    hidden = run_unit(model_, *partitioner_, unit, hidden, anchor);
  add_device_time(options_.time_breakdown, device, times_.forward_s, start);
  return head_loss_backward(hidden, targets, anchor, loss_multiplier);
}

std::vector<at::Tensor> ZeroEngine::queue_window(const std::vector<TokenBatch>& batches, double loss_multiplier) {
  std::vector<at::Tensor> losses;
  if (batches.empty() ||
      !window_->unit_by_unit(static_cast<int64_t>(batches.size()), batches.front().input_ids.numel())) {
    for (const TokenBatch& batch : batches)
      losses.push_back(queue_forward_backward(batch.input_ids, batch.targets, loss_multiplier));
    return losses;
  }
  const at::Device device = comm_.device();
  const bool timed = options_.time_breakdown;
  Clock::time_point start = Clock::now();
  if (timed) sync_current_stream(device);
  std::vector<at::Tensor> input_ids, targets;
  for (const TokenBatch& batch : batches) {
    input_ids.push_back(offload::inputs_to_device(batch.input_ids, device));
    targets.push_back(offload::inputs_to_device(batch.targets, device));
  }
  WindowPassHooks hooks;
  hooks.before_backward = [&] {
    begin_backward(static_cast<int64_t>(batches.size()));
    if (backward_step_ != nullptr && planned_step_ && micro_batches_ >= options_.gradient_accumulation_steps) {
      // No device sync first: a sub-group is written only once its units' backward is done on the device.
      backward_step_->start(*optimizer_, partitioner_->grad_partition(), 1.0 / planned_step_->second,
                            planned_step_->first, partitioner_->compute_partition());
      step_started_in_backward_ = true;
    }
    refuse_unless_ring_fed(step_started_in_backward_,
                           "a window without plan_step() or shorter than gradient_accumulation_steps");
    start = Clock::now();
  };
  hooks.unit_backward_done = [this](size_t unit) {
    if (step_started_in_backward_) backward_step_->unit_done(unit);
  };
  hooks.phase_done = [&](const char* phase) {
    add_device_time(timed, device, std::string(phase) == "forward" ? times_.forward_s : times_.backward_s, start);
  };
  try {
    return run_window_pass(model_, *partitioner_, input_ids, targets, loss_multiplier, hooks,
                           {.group = options_.window_group, .kept_layers = options_.kept_layers});
  } catch (const Error& e) {
    if (step_started_in_backward_) backward_step_->abandon(e.status());
    throw;
  } catch (const std::exception& e) {
    if (step_started_in_backward_)
      backward_step_->abandon(internal_error(std::string("the backward failed: ") + e.what()));
    throw;
  }
}

at::Tensor ZeroEngine::head_loss_backward(const at::Tensor& hidden, const at::Tensor& targets, const at::Tensor& anchor,
                                          double loss_multiplier) {
  const at::Device device = comm_.device();
  const bool timed = options_.time_breakdown;
  Clock::time_point start = Clock::now();
  const at::Tensor logits = run_unit(model_, *partitioner_, model_.num_units() - 1, hidden, anchor).to(at::kFloat);
  const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                                 offload::inputs_to_device(targets, device).reshape(-1),
                                                 /*weight=*/{}, at::Reduction::Mean, /*ignore_index=*/-100);
  add_device_time(timed, device, times_.forward_s, start);
  begin_backward(1);
  start = Clock::now();
  (loss * loss_multiplier).backward();
  add_device_time(timed, device, times_.backward_s, start);
  return loss.detach();
}

void ZeroEngine::begin_backward(int64_t micro_batches) {
  finish_step();  // joins: the backward lands gradients into the partition the followed step reads
  micro_batches_ += micro_batches;
  if (offloaded_grads_) offloaded_grads_->begin_micro_batch(micro_batches_ >= options_.gradient_accumulation_steps);
}

StepOutcome ZeroEngine::step(double lr, double loss_scale) {
  const bool timed = options_.time_breakdown;
  finish_step();  // joins: a step without a micro-batch since the last one reads what that one wrote
  refuse_unless_ring_fed(step_started_in_backward_, "step() after no planned window");
  const Clock::time_point step_start = Clock::now();
  partitioner_->finish_reduction();
  at::Tensor grad = partitioner_->grad_partition();
  double sq_norm = 0.0;
  if (grad_pipeline_) {
    const cpu_adam::GradStats stats = grad_pipeline_->grad_stats();
    sq_norm = stats.finite ? stats.sq_norm : std::numeric_limits<double>::infinity();
  } else {
    sq_norm = grad.to(at::kDouble).pow(2).sum().item<double>();  // the device optimizer's partition
  }
  Clock::time_point start = Clock::now();
  if (partitioner_->partitioned()) sq_norm = sum_over_ranks(sq_norm);
  if (timed) times_.comm_s += seconds_since(start);
  StepOutcome outcome;
  outcome.grad_norm = std::sqrt(sq_norm) / loss_scale;
  outcome.overflow = !std::isfinite(outcome.grad_norm);
  if (!outcome.overflow) {
    // DeepSpeed's unscale_and_clip_grads: one factor that both unscales and clips.
    double combined_scale = loss_scale;
    if (options_.gradient_clipping > 0.0) {
      double clip = (outcome.grad_norm + 1e-6) / options_.gradient_clipping;
      if (clip > 1.0) combined_scale = clip * loss_scale;
    }
    start = Clock::now();
    if (step_started_in_backward_) {
      finish_backward_step(lr, combined_scale, outcome);
    } else if (followed_step_ != nullptr) {
      followed_step_->start(grad, 1.0 / combined_scale, lr);
    } else {
      optimizer_->step(grad, 1.0 / combined_scale, lr, partitioner_->compute_partition(), nullptr, nullptr);
      step_done(optimizer_->device_writes(), seconds_since(start));
    }
  } else if (step_started_in_backward_) {
    finish_backward_step(lr, loss_scale, outcome);  // throws: the update is already applied
  }
  planned_step_.reset();
  start = Clock::now();
  partitioner_->publish_compute_partition();
  add_device_time(timed, comm_.device(), times_.comm_s, start);
  if (timed) {
    if (grad_pipeline_) {
      times_.grad_d2h_s += grad_pipeline_->copy_seconds();
      times_.gpu_idle_s += grad_pipeline_->blocked_seconds();
    }
    times_.gpu_idle_s += std::max(0.0, seconds_since(step_start) - times_.comm_s);
  }
  if (followed_step_ == nullptr || !followed_step_->running()) partitioner_->zero_grads();  // else once it read them
  micro_batches_ = 0;
  last_times_ = times_;
  times_ = StepTimes{};
  return outcome;
}

void ZeroEngine::finish_backward_step(double lr, double loss_scale, const StepOutcome& outcome) {
  step_started_in_backward_ = false;
  const double step_seconds = backward_step_->finish();
  step_done(optimizer_->device_writes(), step_seconds);  // step() counts its wait as GPU idle
  if (lr != planned_step_->first || loss_scale != planned_step_->second)
    throw Error(internal_error("step(lr " + std::to_string(lr) + ", loss scale " + std::to_string(loss_scale) +
                               ") after plan_step(lr " + std::to_string(planned_step_->first) + ", loss scale " +
                               std::to_string(planned_step_->second) + "): the optimizer already stepped with those"));
  if (outcome.overflow)
    throw Error(invalid_argument(
        "the gradient norm is not finite (inf or NaN) and the optimizer, stepping inside the backward, has already "
        "applied it: the weights are no longer usable. Lower the learning rate, or set gradient_clipping > 0 (the "
        "step then waits for the whole gradient and a non-finite one is skipped)"));
}

void ZeroEngine::finish_step() {
  const std::optional<FollowedStep::Joined> joined = followed_step_ ? followed_step_->join() : std::nullopt;
  if (!joined) return;
  step_done({}, joined->step_s);  // its copies are deferred already
  if (options_.time_breakdown) {
    // The forward's phase ran from one stream sync to the next: its device time is the compute plus
    // the gaps its fetches left while they waited for the step.
    times_.forward_s -= joined->idle_s;
    times_.gpu_idle_s += joined->idle_s + joined->joined_s;
  }
}

void ZeroEngine::step_done(std::vector<PartitionWrite> writes, double step_seconds) {
  partitioner_->defer_reads(std::move(writes));
  update_nvme_traffic();
  if (!options_.time_breakdown) return;
  const double copies = optimizer_->last_copy_seconds();
  times_.cpu_optimizer_s += step_seconds - copies;
  times_.param_h2d_s += copies;
  const DeviceShareStats share = optimizer_->last_device_share();
  times_.gpu_optimizer_s += share.seconds;
  times_.gpu_optimizer_elements += share.elements;
  times_.gpu_optimizer_wait_s += share.wait_s;
}

std::map<std::string, at::Tensor> ZeroEngine::master_params() {
  finish_step();  // joins: reads the master the step writes
  if (!options_.offload_optimizer) return partitioner_->assemble(optimizer_->state().master);
  // The offloaded master read into one fp32 copy of the partition (state() would copy the moments too).
  at::Tensor master = at::empty({partitioner_->partition_numel()}, at::kFloat);
  throw_if_error(optimizer_->read_master(0, {master.data_ptr<float>(), static_cast<size_t>(master.numel())}));
  return partitioner_->assemble(master);
}

void ZeroEngine::sync_compute_params() {
  finish_step();  // joins: reads the master and writes the weights the step writes
  at::Tensor compute = partitioner_->compute_partition();
  // bf16 weights rounded as the compact master's high half (ties away), or as Tensor::copy_ casts.
  const bool away = rounds_away(options_);
  if (!options_.offload_optimizer) {
    copy_rounded(compute, optimizer_->state().master, away);
  } else {  // the offloaded master a piece at a time, never a whole copy in host memory
    constexpr int64_t kPiece = 16 << 20;
    at::Tensor piece = at::empty({std::min<int64_t>(kPiece, partitioner_->partition_numel())}, at::kFloat);
    // Master elements [begin, begin + dst.numel()) into `dst`, cast.
    const auto copy_master = [&](int64_t begin, const at::Tensor& dst) {
      for (int64_t done = 0; done < dst.numel(); done += kPiece) {
        at::Tensor host = piece.narrow(0, 0, std::min(kPiece, dst.numel() - done));
        throw_if_error(
            optimizer_->read_master(begin + done, {host.data_ptr<float>(), static_cast<size_t>(host.numel())}));
        copy_rounded(dst.narrow(0, done, host.numel()), host, away);
      }
    };
    if (nvme_params_ != nullptr) {
      nvme_params_->write_all(copy_master);
      (void)nvme_params_->take_traffic();  // not a step's
    } else {
      copy_master(0, compute);
    }
  }
  partitioner_->publish_compute_partition();
}

double ZeroEngine::mean_over_ranks(double value) {
  return comm_.world_size() == 1 ? value : sum_over_ranks(value) / comm_.world_size();
}

double ZeroEngine::sum_over_ranks(double value) {
  at::Tensor t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(comm_.device()));
  comm_.all_reduce_sum(t).wait();
  return t.item<double>();
}

const std::string& ZeroEngine::forward_window_choice() const { return window_->choice(); }

bool ZeroEngine::grad_accumulation_on_device() const {
  return offloaded_grads_ && offloaded_grads_->accumulates_on_device();
}

int64_t ZeroEngine::pinned_bytes() const { return host_tier_ ? host_tier_->pinned_bytes() : 0; }

int64_t ZeroEngine::host_pool_bytes() const { return host_tier_ ? host_tier_->bytes() : 0; }

int64_t ZeroEngine::host_pool_used_bytes() const { return host_tier_ ? host_tier_->used_bytes() : 0; }

NvmeTraffic ZeroEngine::nvme_traffic() const { return nvme_traffic_; }

void ZeroEngine::update_nvme_traffic() {
  NvmeTraffic traffic = optimizer_->traffic();
  if (nvme_params_ != nullptr) {
    const auto [read, written] = nvme_params_->take_traffic();
    traffic.step_read_bytes += read;
    traffic.step_written_bytes += written;
    traffic.resident_bytes += nvme_params_->file_bytes();
  }
  nvme_traffic_ = traffic;
}

}  // namespace tierzero::engine
