// The ZeRO engine: one model, its partitioned parameters, gradients and optimizer, over one
// process group. A training step reads, on every rank:
//
//   for each micro-batch:   loss = engine.forward_backward(ids, targets, loss_scale / accumulation)
//   outcome = engine.step(lr, loss_scale)   // skipped (outcome.overflow) when gradients overflowed
//
// forward_backward runs the model unit by unit (unit_function.h): each unit's parameters are
// fetched from the partitioner before it runs and released after; backward recomputes each unit
// and hands its parameter gradients to the partitioner, which reduces them across ranks while
// backward continues. step() finishes the reductions, takes the global gradient norm, detects
// fp16 overflow, unscales and clips like DeepSpeed, steps the optimizer on this rank's partition
// and publishes the new 16-bit parameters to every rank.
//
// Offloaded optimizer (offload_optimizer): this rank's fp32 master, m, v (record_adam.h; with
// "nvme" in swap files behind pinned buffers) and gradient partition are pinned memory from
// offload/'s pool (the whole budget computed and checked against pinned_memory_limit_bytes at
// construction). With overlap_offload, backward hands each reduced bucket to a side-stream copy
// into a pinned staging slot and a CPU worker adds it into the fp32 gradient partition (recording
// the squared norm as it goes); backward blocks only when every slot is busy. step() waits for the
// last bucket, takes the global norm (no speculation: Adam starts once the clip factor and overflow
// are known), then runs cpu_adam sub-group by sub-group; each sub-group's new 16-bit weights go
// back to the device on a side stream while the next one steps, and the device's current stream is
// ordered after each copy by its event only just before the first read of that sub-group's elements
// (a unit's fetch, stage 3's gather: offload/'s PendingWrites), so the next forward starts on the
// first layers while the last sub-groups are still in flight; the host does not wait for them.
// Without overlap_offload the same kernels run in the same order synchronously: losses and weights
// are the same bit for bit. Reduced buckets leave the device in pieces of at most
// grad_staging_slot_bytes, so pinned staging is grad_staging_buffers x that.
// Offloaded parameters (offload_param): a gather's pieces leave the pinned shard on the
// host-to-device side stream, and only the unit that uses them waits for the copy, so a prefetch
// does not hold up the compute queued before that unit. With offload_param "nvme" the shard lives in
// swap files instead (nvme_params.h): a gather's pieces are read from there into pinned buffers ahead
// of use, and the offloaded optimizer steps each sub-group's new weights into a pinned window that is
// written back there.
//
// The step's modes, chosen once at construction, each an object of its own:
// - gradient landing (offloaded_grads.h): every micro-batch's buckets land on the host, or, with
//   gradient accumulation, micro-batches 1..A-1 are summed on the device (grad_accumulator, decided
//   by engine/layout) and only the last one's buckets leave it, so a step copies and adds the
//   partition once. The engine counts forward_backward calls against gradient_accumulation_steps.
// - step timing: after the backward (step() returns once the optimizer has stepped); followed into
//   the next forward (stage 3, offloaded optimizer, overlap_offload: followed_step.h — Adam writes the
//   partition front to back on a thread of its own and the next forward's gathers wait only for
//   the slices they read, step_progress.h); inside the backward (one rank, no gradient clipping, bf16
//   or fp32, the step announced with plan_step(): backward_step.h — Adam steps each sub-group once
//   the window's backward has landed its gradients, last to first, overlapping the backward).
// - forward shape (forward_window.h): micro-batch by micro-batch, or, at stage 3 with the step
//   followed or the parameters offloaded, the window's micro-batches unit by unit both ways
//   (queue_window, window_pass.h): each unit fetched once for all the forwards and once for all the
//   backwards, its gradients summed over the micro-batches in fp32 on the device and reduced once.
//   The parameters (and a LoRA run's frozen base, functional_model.h) then cross PCIe twice a step
//   and the gradients once, whatever the accumulation; losses and weights are the micro-batch
//   path's with the device accumulator, bit for bit (on one rank, up to the order of a tied
//   weight's sums).
// - parameter home: the device, pinned or pageable host memory, or NVMe (the partitioner, above).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/comm/comm.h"
#include "engine/layout/layout.h"
#include "engine/model/functional_model.h"
#include "engine/zero/internal/backward_step.h"
#include "engine/zero/internal/device_share.h"
#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/partitioner.h"
#include "engine/zero/internal/record_adam.h"

namespace tierzero::checkpoint {
class WriteBuffers;  // checkpoint/storage/storage.h
}  // namespace tierzero::checkpoint

namespace tierzero::engine {

// Where an offloaded step (offload_optimizer) accumulates the reduced gradients of a window of
// micro-batches (offloaded_grads.h; the choice is engine/layout's, which the planner reports): kHost
// lands every micro-batch's buckets (D2H + a CPU pass each); kDevice adds micro-batches 1..A-1 into
// an fp32 accumulator of this rank's partition on the compute device (partition x 4 bytes) and lands
// only the last; kAuto picks kDevice on a GPU when gradient_accumulation_steps > 1 and the
// accumulator fits the GPU budget. Results are the same bits either way for world sizes that are
// powers of two.
using state_layout::GradAccumulator;

// How the offloaded optimizer holds the fp32 master weights (tierzero.master_weights): kFp32, 4 bytes an
// element; kCompact, exact in 2: the 16-bit compute weights (bf16, rounded to nearest with ties away from
// zero) plus a 16-bit residual from which the fp32 master is rebuilt bit for bit (cpu_adam::AdamBuffers::
// master_residual). Needs bf16 compute weights and an offloaded optimizer.
enum class MasterLayout : uint8_t { kFp32, kCompact };

// ZeroEngineOptions::optimizer_records_in_memory: as many records as the pinned budget holds.
inline constexpr int64_t kRecordsByBudget = -1;

struct ZeroEngineOptions {
  PartitionOptions partition;  // stage, dtypes, bucket sizes
  AdamConfig adam;
  bool offload_optimizer = false;                  // optimizer state and step on the CPU (cpu_adam)
  int cpu_threads = 0;                             // CPU optimizer and background-save copy threads; 0 = all cores
  double gradient_clipping = 0.0;                  // max global gradient norm; 0 = none
  int64_t sub_group_size = 1'000'000'000;          // zero_optimization.sub_group_size: elements of this rank's
                                                   // partition the CPU optimizer steps (and sends back) at a time
  bool overlap_offload = true;                     // offloaded optimizer: gradients leave the device and are added on
                                                   // the CPU while backward runs; false: synchronously, same results
  int grad_staging_buffers = 2;                    // offloaded optimizer: pinned staging slots for reduced buckets
                                                   // (offload_optimizer.buffer_count)
  uint64_t grad_staging_slot_bytes = 64ull << 20;  // offloaded optimizer: bytes of one staging slot, at
                                                   // most (less when no bucket is that large); a larger bucket leaves
                                                   // the device in slot-sized pieces. Pinned staging memory is
                                                   // grad_staging_buffers x this, not x reduce_bucket_size
  NvmeOptimizerOptions nvme_optimizer;  // with offload_optimizer and nvme_optimizer.paths: the state (master,
                                        // m, v) on NVMe, stepped through pinned buffers (record_adam.h)
  NvmeParamOptions nvme_params;         // with partition.offload_params, offload_optimizer and nvme_params.paths:
                                        // the compute parameter shard on NVMe (nvme_params.h)
  at::ScalarType optimizer_state_dtype = at::kFloat;  // tierzero.optimizer_state_dtype: m and v of the
                                                      // offloaded optimizer: kFloat, kBFloat16, or kChar for 8-bit
                                                      // blockwise codes (int8 m, uint8 v, an fp32 scale per
                                                      // cpu_adam::kMomentBlock elements)
  MasterLayout master_layout = MasterLayout::kFp32;   // tierzero.master_weights: the offloaded optimizer's master
  cpu_adam::Bf16Rounding params16_rounding = cpu_adam::Bf16Rounding::kNearestEven;  // no ds_config key (yet):
                                                      // the bf16 weights an fp32-master offloaded optimizer writes;
                                                      // kNearestAway rounds them as a compact master's high half, so
                                                      // fp32 and compact runs (and their checkpoints) are the same
                                                      // bits and interchangeable
  at::ScalarType offload_grad_dtype = at::kFloat;     // tierzero.offload_grad_dtype: the offloaded optimizer's host
                                                      // gradient partition, kFloat or kBFloat16
  int64_t grad_ring_records = 0;  // tierzero.grad_ring_records: with the optimizer stepping inside the window's
                                  // backward, the host gradients land in this many record-sized slots, each
                                  // freed once the optimizer has read its record (host_grad_pipeline.h),
                                  // instead of the whole partition; 0: the partition
  int64_t optimizer_records_in_memory = 0;  // tierzero.optimizer_records_in_memory: with the state on NVMe, the
                                            // first N sub-group records stay in pinned memory and move no bytes;
                                            // kRecordsByBudget: as many as pinned_memory_limit_bytes holds
  GradAccumulator grad_accumulator = GradAccumulator::kAuto;  // tierzero.offload_grad_accumulator: where an
                                                              // offloaded step accumulates micro-batches
  int64_t gradient_accumulation_steps = 1;                    // micro-batches per step(): the last one's buckets land
  uint64_t planned_gpu_peak_bytes = 0;     // the GPU's allocated peak the planner predicts without the
                                           // accumulator or a forward window (engine/plan); 0 = not known
  int64_t micro_batch_tokens = 0;          // tokens of one micro-batch (batch x seq_len), to size the forward
                                           // window up front; 0 = from the first window's tensors
  int64_t window_group = 1;                // micro-batches the window runs as one batch through each body unit
                                           // (tierzero.window_group as the planner resolved it; window_pass.h)
  int64_t kept_layers = 0;                 // decoder layers, the last ones, whose graphs the window keeps instead
                                           // of recomputing (tierzero.kept_activations as the planner resolved it)
  uint64_t pinned_memory_limit_bytes = 0;  // tierzero.pinned_memory_limit; 0 = none
  uint64_t gpu_memory_limit_bytes = 0;     // tierzero.gpu_memory_limit (LibTorch's caching allocator); 0 = none
  bool time_breakdown = false;             // fill last_step_times() (wall_clock_breakdown); syncs the
                                           // current stream at phase boundaries, so only when asked
  // tierzero.gpu_optimizer_share: the share (0..<1) of the offloaded optimizer's elements stepped on the
  // GPU (device_share.h) after the backward, while the CPU steps the others; needs a compact master,
  // a bf16 compute device, and a CPU whose SIMD target fuses multiply-adds (the bytes are then the CPU's).
  double gpu_optimizer_share = 0.0;
  // The kernel the share runs (device_share.h's DeviceKernel): empty, cpu_adam::step_on_gpu on a CUDA
  // device. A CPU engine's share needs one (tests give cpu_adam::step_portable).
  DeviceKernel gpu_share_kernel;
};

// Where the last step's time went, in seconds (ZeroEngineOptions::time_breakdown; zero otherwise).
// Host timers around phases whose device work is synchronised at the phase's end, and CUDA events
// around the side-stream copies.
struct StepTimes {
  double forward_s = 0.0;        // forward passes of the step's micro-batches
  double backward_s = 0.0;       // backward passes (reductions and gradient offload overlapped)
  double grad_d2h_s = 0.0;       // offloaded gradient copies, as they ran on the D2H stream
  double cpu_optimizer_s = 0.0;  // the optimizer step (CPU Adam over every sub-group when offloaded); when
                                 // it follows into the next forward, the one that ran during this step's
  double param_h2d_s = 0.0;      // updated weights' copies to the device, as they ran on the H2D stream
  double comm_s = 0.0;           // step(): the norm's all-reduce and the parameters' all-gather
  double gpu_optimizer_s = 0.0;  // tierzero.gpu_optimizer_share: the device's pieces in flight (within
                                 // cpu_optimizer_s), from the first queued to the last seen landed
  int64_t gpu_optimizer_elements = 0;  // the elements the device stepped
  double gpu_optimizer_wait_s = 0.0;   // the optimizer's thread waited for the device, its own pieces done
  double gpu_idle_s = 0.0;       // the compute stream had nothing to do but wait for the host: step()'s
                                 // time less comm_s, plus backward blocked on full staging slots, plus
                                 // the host blocked on a followed optimizer step (forward_s excludes it)
};

// Where building the engine went, in seconds (the trainer's start-up line). The phases' wall times
// exclude their reads of the weights, which weights_s sums.
struct EngineStartup {
  double weights_s = 0.0;     // inside the ParamSource's reads (a file's reads, or random init's draws)
  double weights_cpu_s = 0.0; // the process's CPU seconds meanwhile (weights_cpu_s / weights_s: cores busy)
  uint64_t weight_bytes = 0;  // the fp32 bytes those reads gave, every pass counted
  double pinned_s = 0.0;      // the pinned host buffers: allocated, faulted in, registered with CUDA, zeroed
  double setup_s = 0.0;       // the rest before the parameters: checks, device, copy streams, CPU Adam, NVMe files
  double params_s = 0.0;      // the partitioner: compute weights cast from the reads, first NVMe parameter writes
  double optimizer_s = 0.0;   // the rest: the optimizer's state (master split, first record writes), step modes
};

// What step() did.
struct StepOutcome {
  bool overflow = false;   // inf/NaN in the gradients: the step was skipped, gradients dropped
  double grad_norm = 0.0;  // global L2 norm of the unscaled gradient (inf/NaN on overflow)
};

// One micro-batch's tokens: input_ids and targets [B, T] int64 (targets already shifted).
struct TokenBatch {
  at::Tensor input_ids;
  at::Tensor targets;
};

class FollowedStep;
class ForwardWindow;

class ZeroEngine {
 public:
  // Partitions the parameters `params` gives (every parameter of `model`, identical on every rank)
  // over `comm`'s ranks. Each rank reads only what it keeps: its fp32 master partition, and its
  // compute parameters (stages 0-2: all of them, cast; stage 3: its shard and the persistent
  // parameters), in bounded pieces (param_loading.h), so a streamed source (open_safetensors_params)
  // never puts the whole model in host memory. `model` and `comm` must outlive the engine; `params`
  // is not used after the constructor returns. Throws tierzero::Error when a parameter is missing or
  // mis-shaped, a read fails, or an option is unsupported.
  ZeroEngine(const FunctionalModel& model, ParamSource& params, const ZeroEngineOptions& options, Comm& comm);
  // The same from tensors in memory (name -> whole tensor, any float dtype): bit for bit the engine
  // the source constructor builds from the same values.
  ZeroEngine(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params,
             const ZeroEngineOptions& options, Comm& comm);
  ~ZeroEngine();

  // Runs one micro-batch: input_ids and targets [B, T] int64 (targets already shifted: position
  // t predicts targets[t]; -100 ignored). Backpropagates loss * loss_multiplier (the loss scale
  // over the accumulation steps) into the partitioned gradients. Returns this rank's mean
  // cross-entropy loss, unscaled, as an fp32 scalar on the compute device that holds it once the
  // queued work has run: the host does not wait for the device here, so the next micro-batch's
  // work is queued while this one's runs.
  at::Tensor queue_forward_backward(const at::Tensor& input_ids, const at::Tensor& targets, double loss_multiplier);
  // queue_forward_backward, then waits for the loss and returns it.
  double forward_backward(const at::Tensor& input_ids, const at::Tensor& targets, double loss_multiplier);
  // queue_forward_backward on each micro-batch of `batches` in order; at stage 3, when the optimizer
  // step follows into the forward or the parameters are offloaded, and the window fits the GPU
  // budget (forward_window_choice()), the window runs
  // unit by unit both ways instead (window_pass.h): the same losses and weights as that micro-batch
  // path with the device gradient accumulator, bit for bit. Returns the losses, as
  // queue_forward_backward does.
  std::vector<at::Tensor> queue_window(const std::vector<TokenBatch>& batches, double loss_multiplier);

  // Announces the next step()'s arguments before its window runs. When the engine can step the
  // optimizer inside the backward (backward_step_choice()) and the window runs unit by unit, the
  // optimizer then starts during that window's backward (backward_step.h); step() must be given the
  // same lr and loss_scale. Optional: without it every step runs after its backward.
  void plan_step(double lr, double loss_scale);

  // Ends the accumulation window: reduces, checks overflow (gradients hold loss * loss_scale),
  // unscales and clips by the global norm, steps the optimizer with learning rate `lr` (unless
  // overflow) and zeroes the gradients. A collective. When the step follows into the next forward
  // it is still running when this returns; everything that reads its results waits for it.
  StepOutcome step(double lr, double loss_scale);

  // Joins the optimizer step still running from step() (when it follows into the forward:
  // followed_step.h), then zeroes the gradients it read; nothing when none runs. Throws that step's
  // error (a failed write of NVMe-resident state, say): call it after the last step() so that no
  // error goes unreported. The engine joins here, and only where the step's results are needed
  // whole: a backward (it lands gradients into the partition the step reads), step(),
  // master_params(), sync_compute_params(), partitioner() and optimizer().
  void finish_step();

  // The fp32 master weights, whole, on the CPU. A collective.
  std::map<std::string, at::Tensor> master_params();

  // Rewrites the compute weights from the fp32 master weights on every rank (after the
  // optimizer state was loaded). A collective.
  void sync_compute_params();

  // Mean of `value` over the ranks (for logging). A collective.
  double mean_over_ranks(double value);

  // Where the last step's time went (zeros unless options().time_breakdown). Covers the
  // micro-batches since the step before it and that step() call.
  const StepTimes& last_step_times() const { return last_times_; }
  // Bytes of host memory the offloaded step holds pinned for the device (master, m, v, gradients,
  // staging, 16-bit weights, offloaded parameter shard); 0 when nothing is offloaded or no GPU.
  int64_t pinned_bytes() const;
  // Bytes of the offloaded step's host pool (engine/layout's pinned buffer list, pinned or, without a
  // GPU, plain host memory), and of them the bytes its buffers take; 0 when nothing is offloaded.
  int64_t host_pool_bytes() const;
  int64_t host_pool_used_bytes() const;
  // Whether the offloaded step accumulates micro-batches on the compute device (GradAccumulator), and
  // why: "device (5.40 GB fp32 on cuda:0: ...)" or "host (...)"; empty without an offloaded optimizer.
  bool grad_accumulation_on_device() const;
  const std::string& grad_accumulator_choice() const { return grad_accumulator_choice_; }
  // Whether the optimizer step runs on while the next forward starts, and whether queue_window runs
  // the window's forwards unit by unit, and why: "unit by unit across 4 micro-batches (...)" or
  // "micro-batch by micro-batch (...)"; empty when the window cannot run (forward_window.h) or its
  // size is not known yet.
  bool follows_step() const { return followed_step_ != nullptr; }
  const std::string& forward_window_choice() const;
  // Whether the optimizer can step inside the window's backward, and why (or why not): empty when the
  // step does not follow into the forward at all.
  bool steps_in_backward() const { return backward_step_ != nullptr; }
  const std::string& backward_step_choice() const { return backward_step_choice_; }
  // The NVMe traffic: the NVMe-resident optimizer's (bytes read and written by the last optimizer
  // step that finished — with a step that follows into the forward, the one that ran during this
  // step), plus the NVMe-resident parameters' (bytes their gathers read and the optimizer wrote
  // since the step before), and the swap bytes on disk of both; zeros when nothing is on NVMe or
  // before the first step.
  NvmeTraffic nvme_traffic() const;

  Comm& comm() { return comm_; }
  const FunctionalModel& model() const { return model_; }
  // The partitioner and the optimizer, for what reads or writes their state (checkpoints, exports,
  // evaluation): join the optimizer step in flight first (finish_step), so their values are final.
  Partitioner& partitioner() {
    finish_step();
    return *partitioner_;
  }
  PartitionOptimizer& optimizer() {
    finish_step();
    return *optimizer_;
  }
  const ZeroEngineOptions& options() const { return options_; }
  const EngineStartup& startup() const { return startup_; }

 private:
  // Runs the last unit (norm + LM head) and the loss on `hidden`, waits for the optimizer step in
  // flight, then backpropagates loss * loss_multiplier. Returns the loss (detached, on the device).
  at::Tensor head_loss_backward(const at::Tensor& hidden, const at::Tensor& targets, const at::Tensor& anchor,
                                double loss_multiplier);
  // Chooses the step's modes once, at the end of construction: its timing (after the backward; or
  // followed into the next forward, followed_step_, and where possible inside the backward,
  // backward_step_) and the forward's shape (window_).
  void choose_step_modes();
  // Sets backward_step_ (and backward_step_choice_) when the optimizer can step inside the backward.
  void step_in_backward_if_possible();
  // With the gradient ring (ZeroEngineOptions::grad_ring_records): throws unless the ring holds every
  // record the backward may hold at once (check_engine_settings refused, at construction's start,
  // every ring whose optimizer cannot step inside the window's backward).
  void check_grad_ring() const;
  // With the gradient ring, throws for `what` (a backward or step) unless `steps_in_backward`: the
  // ring never holds the whole gradient a step after the backward would read.
  void refuse_unless_ring_fed(bool steps_in_backward, const char* what) const;
  // step()'s end for a step started inside the backward with `lr` and `loss_scale`: waits for it.
  // Throws when they are not what plan_step() announced, or when the gradient was not finite (the
  // update is already applied).
  void finish_backward_step(double lr, double loss_scale, const StepOutcome& outcome);
  // After an optimizer step of `step_seconds`: defers `writes`, its device copies, to their first
  // reads, updates the NVMe traffic and counts its time (CPU and copies) in times_.
  void step_done(std::vector<PartitionWrite> writes, double step_seconds);
  // Sets nvme_traffic_ from the optimizer's traffic and the parameters' since the last call.
  void update_nvme_traffic();
  // The sum of `value` over the ranks. A collective.
  double sum_over_ranks(double value);
  // Before a backward lands gradients into the partition: joins the followed step (it reads them),
  // counts `micro_batches` more and tells the accumulator whether the window's last has come.
  void begin_backward(int64_t micro_batches);

  const FunctionalModel& model_;
  Comm& comm_;
  ZeroEngineOptions options_;
  EngineStartup startup_;
  // The offloaded step's host side (null unless offloaded), declared before what uses it.
  std::unique_ptr<HostTier> host_tier_;
  std::unique_ptr<cpu_adam::CpuAdam> cpu_adam_;
  std::unique_ptr<DeviceCopies> copies_;
  std::unique_ptr<DeviceShare> device_share_;  // the optimizer's GPU share, or null (outlives optimizer_)
  std::unique_ptr<NvmeParams> nvme_params_;  // the parameter shard's home on NVMe, or null
  std::unique_ptr<HostGradPipeline> grad_pipeline_;
  std::unique_ptr<OffloadedGrads> offloaded_grads_;
  std::string grad_accumulator_choice_;
  std::unique_ptr<Partitioner> partitioner_;
  std::unique_ptr<PartitionOptimizer> optimizer_;
  NvmeTraffic nvme_traffic_;                         // optimizer's + parameters', after the last finished step
  int64_t micro_batches_ = 0;                        // forward_backward calls since the last step()
  StepTimes times_;                                  // the step being accumulated
  StepTimes last_times_;                             // the last finished step
  // The step's modes (choose_step_modes): the forward's shape, and the optimizer step that follows
  // into the next forward (null: it runs after the backward; declared late: joined first).
  std::unique_ptr<ForwardWindow> window_;
  std::unique_ptr<FollowedStep> followed_step_;
  // The optimizer step inside the backward (null when not possible), what plan_step() announced for
  // the next step, and whether the window in flight started it.
  std::unique_ptr<BackwardStep> backward_step_;
  std::string backward_step_choice_;
  std::optional<std::pair<double, double>> planned_step_;  // lr, loss_scale
  bool step_started_in_backward_ = false;
};

// ---- Checkpoints (checkpoint/engine_format) ----------------------------------------------------
// Saving and resuming a ZeRO engine through checkpoint/'s engine checkpoints
// (checkpoint/engine_format/engine_checkpoint.h): one flat group holding every parameter in first-use order,
// with three fp32 states (master weights, exp_avg, exp_avg_sq), each rank writing its own
// partition in the layout its stage uses (DeepSpeed's padding rules), so the files map 1:1 onto
// the engine's buffers. The manifest carries the Adam step count, the loss scaler and LR schedule
// state and the model's HF config.json; each rank's record carries its iteration and data position.
//
// Resume reproduces the uninterrupted run exactly at the same world size; at another world size
// the checkpoint reader re-partitions the states (same stage required).

// Training state kept beside the engine's partitions.
struct CheckpointExtras {
  int64_t iteration = 0;            // training iterations done (fp16-skipped steps included)
  nlohmann::json loss_scaler;       // LossScaler::state(), or null
  nlohmann::json lr_scheduler;      // LrSchedule::state(), or null
  nlohmann::json data;              // a rank's MicroBatchIterator::state(), or null
  std::string model_config_json{};  // the model's HF config.json text (rank 0's is saved), or empty
  int saved_world_size = 0;         // filled by load_engine_checkpoint
};

// Saves checkpoint "global_step<iteration>" under `dir` and points DIR/latest at it. A collective:
// every rank calls it with its own extras (loss_scaler, lr_scheduler and model_config_json are
// taken from rank 0; the config makes `tierzero convert` write OUT/config.json). The checkpoint is
// durable when it returns ok on every rank; a failure on any rank fails all. `compression_level`
// 1..22 stores each section as a zstd frame of that level (tierzero.checkpoint.compression); 0 raw.
// An offloaded state with a compact master or 8-bit moments is saved as it lives (format_version 3,
// record by record: ~6.03 bytes/param with int8 moments, 8 with bf16 ones, vs 12 for fp32), and
// load_engine_checkpoint loads such a checkpoint straight back (bit for bit) when the run has the
// same layout and world size, else through the decoded fp32 values.
// `write_buffers` (nullptr: the writer's own 4 of 16 MiB) are the rank file's staging buffers,
// borrowed for the save (checkpoint::CheckpointOptions::write_buffers).
Status save_engine_checkpoint(const std::string& dir, ZeroEngine& engine, const CheckpointExtras& extras,
                              int compression_level = 0, const checkpoint::WriteBuffers* write_buffers = nullptr);

// Loads the checkpoint DIR/latest names into `engine` (master weights, moments, Adam step count,
// compute weights) and returns the extras, `data` being this rank's saved position when the
// world size is unchanged, else rank 0's. A collective. Errors name the directory and the
// mismatch (stage, parameter names or shapes). DIR may also be a DeepSpeed ZeRO-1/2/3 checkpoint
// (DIR/latest + *_optim_states.pt, checkpoint/deepspeed/deepspeed_source.h: fp32 master, exp_avg,
// exp_avg_sq, step, loss scaler, LR scheduler and global_steps as `iteration`; no data position):
// same stage, any world size, every parameter of the model trainable there.
Result<CheckpointExtras> load_engine_checkpoint(const std::string& dir, ZeroEngine& engine);

// A save_engine_checkpoint (above) whose bytes stream out while training goes on
// (docs/design.md, "Saves that overlap training"). start() begins checkpoint
// "global_step<iteration>" and returns with the state being written by a thread of its own; the steps
// after it run meanwhile, the offloaded optimizer holding its update of each element until the save
// has copied it out (internal/save_progress.h), so the files are those save_engine_checkpoint would
// have written at start(), byte for byte. With write-behind buffers (start()'s `write_buffers`,
// more of them than the disk has in flight) the state's reads, and so the optimizer's waits, run
// ahead of the disk by up to their bytes; the disk drains behind, possibly over several steps.
// written() tells whether the write has ended; finish() waits for the last byte and commits: the
// checkpoint is durable, and DIR/latest names it, only when finish() returns ok; until then the
// previous one stays DIR/latest. A write error (a full disk) is returned by finish(). All three are
// collectives. An optimizer that cannot hold its steps (on the device) is saved before start()
// returns.
class BackgroundSave {
 public:
  // Begins the save (save_engine_checkpoint's arguments); `engine` and `write_buffers` outlive it.
  static Result<std::unique_ptr<BackgroundSave>> start(const std::string& dir, ZeroEngine& engine,
                                                       const CheckpointExtras& extras, int compression_level = 0,
                                                       const checkpoint::WriteBuffers* write_buffers = nullptr);
  // Not finished: waits for the writer and commits nothing (what it staged, DIR/TAG.partial, is
  // removed by the next save or the next run's start).
  virtual ~BackgroundSave() = default;
  // True when every rank's write has ended (its files synced, or stopped by an error): finish() then
  // waits for nothing but the commit. Does not wait; call it on every rank at the same point.
  virtual bool written() = 0;
  // Waits for the write, then commits. Call once.
  virtual Status finish() = 0;
  // Seconds the optimizer's steps waited for the save to read the state they update.
  virtual double held_seconds() const = 0;
  // Seconds from start() until this rank's files were written and synced (the save's own time;
  // finish() may come later). Read after finish().
  virtual double write_seconds() const = 0;
};

// Makes `status` the same on every rank of `comm`: a rank's own error when it failed, else an
// internal error saying `what` failed on another rank (see its log). A collective.
Status agree_across_ranks(Comm& comm, const Status& status, const std::string& what);

// ---- 16-bit export (save_16bit_model) ----------------------------------------------------------
// Export of consolidated 16-bit weights, DeepSpeed's save_16bit_model (with
// stage3_gather_16bit_weights_on_model_save for stage 3): the fp32 master weights, rounded (to
// nearest even) to the training's compute dtype — bf16 or fp16; fp32 when training in fp32 — are
// written by rank 0 as a Hugging Face model directory through checkpoint/'s consolidation writer
// (checkpoint/convert/consolidate.h):
//   config.json                          the model's config.json text, torch_dtype the export's
//   generation_config.json, tokenizer files  from options.companion_dirs (generation_config.json derived
//                                        from config.json where none has one)
//   model.safetensors                    or, above max_shard_bytes of tensor data,
//   model-0000i-of-0000N.safetensors + model.safetensors.index.json
// Names are the engine's parameter names, which are Hugging Face's; a tied embedding is written once
// (model.embed_tokens.weight, no lm_head.weight), as transformers writes tied models.
//
// Memory: the weights stream range by range from the ranks' partitions to rank 0's writer
// (master_weights_source.h): rank 0 holds the writer's read-ahead (read_ahead_bytes) and write
// buffers, every rank at most one range of read_piece_bytes on its device; the model is never
// assembled.

struct Export16bitOptions {
  uint64_t max_shard_bytes = 5'000'000'000;  // tensor data per safetensors file (transformers' "5GB")
  uint64_t read_ahead_bytes = 256ull << 20;  // rank 0: weights read ahead of the writer, at most
  uint64_t read_piece_bytes = 256ull << 20;  // fp32 bytes of a parameter moved to rank 0 at a time
                                             // (a multiple of 64)
  bool progress = false;                     // rank 0: a progress bar on stderr
  std::vector<std::string> companion_dirs;   // model directories giving the tokenizer files and
                                             // generation_config.json (checkpoint::collect_companion_files)
};

// Writes `engine`'s model into `out_dir`, which must not exist or be empty; it appears complete or
// not at all (written under OUT.partial, then renamed). `config_json` is the model's HF config.json
// text (read_model_config_text, or to_hf_json for a config built in code), copied with every other
// key kept and "torch_dtype" (transformers 5's "dtype" when that is the key used) set to the
// export's dtype. A collective: every rank calls it; the status is the same on every rank, rank 0's
// error naming the file.
Status export_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& out_dir,
                          const Export16bitOptions& options = {});

// Fails when `out_dir` exists and is not an empty directory (what export_16bit_model would refuse),
// naming it and the fix: the trainer checks before training, not after it.
Status check_export_dir(const std::string& out_dir);

// Writes the same files into `save_dir`, an engine checkpoint directory, beside `latest` and the
// tag directories — Hugging Face Trainer's layout of a DeepSpeed checkpoint, so from_pretrained
// and `tierzero convert` both read the directory. The files are written complete in a staging
// directory first, then each renamed over any earlier save's file of the same name. A collective.
Status save_16bit_model(ZeroEngine& engine, const std::string& config_json, const std::string& save_dir,
                        const Export16bitOptions& options = {});

// ---- Evaluation (eval_pass.cpp) ----
// A forward-only pass through a ZeRO engine, for evaluating held-out data between training steps.
// It runs the model as a training micro-batch's forward does, unit by unit through the engine's
// partitioner (stage 3: each unit's parameters all-gathered before it runs and released after;
// offloaded parameters streamed from pinned memory or NVMe the same way), but without autograd,
// gradients or optimizer work, and it leaves the training state as it found it: the weights, the
// optimizer, the gradients and the micro-batch count of the accumulation window are untouched, and
// at stage 3 the gathered parameters are dropped afterwards so the next step starts as it would have.
// LoRA dropout is off inside it (transformers' model.eval()).

// The sum, over the positions of `targets` [B, T] int64 that are not -100, of the cross-entropy of
// the model's fp32 logits for `input_ids` [B, T] int64 — the per-token losses a training step
// averages — as a double scalar on the compute device (the host does not wait for it). Waits first
// for an optimizer step still running. A collective at stage 3 (the gathers): every rank calls it
// the same number of times.
at::Tensor queue_eval_loss_sum(ZeroEngine& engine, const at::Tensor& input_ids, const at::Tensor& targets);

}  // namespace tierzero::engine
