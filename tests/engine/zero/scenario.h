// Test scenarios for the ZeRO engine: a tiny Llama trained for a few steps by the engine (any
// stage, optimizer placement, world size) and by plain single-process autograd with a textbook
// AdamW (the reference), on the same deterministic token batches.
#pragma once

#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/comm/comm.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine::testing {

struct Scenario {
  int stage = 0;
  bool offload = false;         // optimizer on the CPU (cpu_adam)
  bool offload_params = false;  // stage 3: compute parameter shards in pinned host memory
  int world_size = 1;
  int steps = 3;
  int accumulation = 1;  // micro-batches per rank per step
  int micro_batch = 2;   // samples per micro-batch
  int seq_len = 8;
  bool tied = true;                 // tied embeddings (a parameter in two units)
  double clip = 0.0;                // gradient clipping (max global norm)
  std::string dtype = "fp32";       // compute dtype: fp32 | bf16 | fp16
  std::string grad_dtype = "fp32";  // gradient buckets and accumulation (tierzero.grad_accum_dtype): fp32 | bf16
  std::string device = "cpu";       // cpu | cuda
  int64_t bucket_numel = 1000;      // small, so parameters straddle buckets and partitions
  int64_t persistence_threshold = 64;
  int64_t prefetch_numel = 4000;
  int64_t max_live_numel = 1'000'000'000;      // stage 3: stage3_max_live_parameters
  int64_t max_reuse_distance = 1'000'000'000;  // stage 3: stage3_max_reuse_distance
  std::string resume_dir;                      // continue from the engine checkpoint here (its iteration on)
  std::string save_dir;                        // save an engine checkpoint here after the last step
  bool overlap = true;                         // offloaded optimizer: ZeroEngineOptions::overlap_offload
  int64_t sub_group_numel = 1'000'000'000;     // ZeroEngineOptions::sub_group_size
  int staging_buffers = 2;                     // ZeroEngineOptions::grad_staging_buffers
  bool compare_overlap = false;                // worker: check the run equals the same run with overlap off, bit
                                               // for bit (instead of comparing with the reference)
  int64_t staging_slot_bytes = 64 << 20;       // ZeroEngineOptions::grad_staging_slot_bytes
  std::string weights_dir;                     // initial weights: this HF directory's safetensors (else random init)
  bool streamed = false;                       // with weights_dir: the engine reads them through
                                               // open_safetensors_params, not a map from load_hf_weights
  bool compare_streamed = false;               // worker: check the run equals the same run with streamed off, bit
                                               // for bit
  std::string grad_accumulator = "auto";       // with offload: ZeroEngineOptions::grad_accumulator, auto | host |
                                               // device
  int window_steps = 0;                        // ZeroEngineOptions::gradient_accumulation_steps; 0 = accumulation
  bool compare_accumulator = false;            // worker: check the run equals the same run with grad_accumulator
                                               // "host", bit for bit
  std::string nvme_dir;                        // with offload: the optimizer state on NVMe, swap files here
  int nvme_buffers = 4;                        // NvmeOptimizerOptions::buffer_count
  bool nvme_pipeline = true;                   // NvmeOptimizerOptions::pipeline_read and pipeline_write
  bool compare_nvme = false;                   // worker: check the run equals the same run with the state and
                                               // parameters in host memory (nvme_dir, nvme_params_dir empty), bit
                                               // for bit
  std::string nvme_params_dir;                 // with offload and offload_params: the parameter shard on NVMe,
                                               // swap files here
  int nvme_param_buffers = 12;                 // NvmeParamOptions::buffer_count
  int64_t nvme_param_buffer_numel = 1024;      // NvmeParamOptions::buffer_numel (small: a unit takes several)
  int64_t max_in_cpu = 0;                      // NvmeParamOptions::max_in_cpu
  std::string master = "fp32";                 // with offload: ZeroEngineOptions::master_layout, fp32 | compact
  std::string state_dtype = "fp32";            // with offload: ZeroEngineOptions::optimizer_state_dtype, fp32 |
                                               // bf16 | int8
  bool round_away = false;                     // ZeroEngineOptions::params16_rounding kNearestAway
  int64_t records_in_memory = 0;               // ZeroEngineOptions::optimizer_records_in_memory
  std::string host_grads = "fp32";             // with offload: ZeroEngineOptions::offload_grad_dtype, fp32 | bf16
  int64_t grad_ring_records = 0;               // ZeroEngineOptions::grad_ring_records (0: the whole partition)
  int64_t window_group = 1;                    // ZeroEngineOptions::window_group
  int64_t kept_layers = 0;                     // ZeroEngineOptions::kept_layers
  bool plan_steps = true;                      // ZeroEngine::plan_step before each window, as the trainer does: the
                                               // optimizer steps inside the backward where it can (the run checks
                                               // steps_in_backward() is what the scenario implies)
  bool compare_fp32_master = false;            // train_with_engine: after the run, trains the same scenario with
                                               // an fp32 master rounded ties-away (master "fp32", round_away) on
                                               // the same ranks and throws unless the two are equal bit for bit

  // Command-line form, for the multi-rank worker: "--stage=2 --offload=1 ...".
  std::vector<std::string> to_args() const;
  // Parses to_args()' form; unknown arguments are an error.
  static Scenario from_args(const std::vector<std::string>& args);
  // "stage2_offload_w4_acc1_fp32_cpu" ("stage3_offload_params_..." with offloaded parameters), then
  // the stage 3 knobs that differ from the defaults.
  std::string name() const;
};

// The model of every scenario: vocab 64, hidden 32, 2 layers, GQA.
ModelConfig test_model_config(bool tied);

// Losses per step (mean over the global batch) and the final fp32 parameters.
struct TrainTrace {
  int first_step = 0;  // losses[i] is step first_step + i
  std::vector<double> losses;
  std::vector<double> grad_norms;  // engine runs: StepOutcome::grad_norm per step (the reference: none)
  std::map<std::string, at::Tensor> params;
  // Stage 3 only (ShardedPartitioner::stats() at the end of the run; zero and empty otherwise).
  int64_t peak_live_numel = 0;
  int64_t reduce_scatters = 0;
  std::map<std::string, int64_t> gathers;  // parameter name -> times all-gathered
};

// Trains with the engine over `comm` (one rank of scenario.world_size). Throws tierzero::Error when
// stage 3 had more than scenario.max_live_numel gathered elements alive at once, so multi-rank
// runs check that limit too.
TrainTrace train_with_engine(const Scenario& scenario, Comm& comm);
// Empty when `got` and `want` have the same losses, gradient norms and parameters bit for bit; else
// the differences.
std::string compare_exactly(const TrainTrace& got, const TrainTrace& want);
// Trains the same global batches in one process with plain autograd and AdamW (fp32, CPU).
TrainTrace train_reference(const Scenario& scenario);

// train_with_engine on one rank: scenario.device ("cuda": GPU 0).
TrainTrace train_one_rank(const Scenario& scenario);

// Trains `whole` uninterrupted on one rank, then `first` for `split` steps saving to
// `checkpoint_dir`, then `second` resuming from there up to whole.steps (first's and second's steps,
// save_dir and resume_dir are set here). Empty when the resumed run equals the uninterrupted run's
// last steps and weights bit for bit, else the differences.
std::string resume_difference(const Scenario& whole, Scenario first, Scenario second, int split,
                              const std::string& checkpoint_dir);

// Empty when `got` matches `want`: losses of the same steps within loss_rtol (relative), every
// parameter element within param_atol; else a description of each mismatch.
std::string compare_traces(const TrainTrace& got, const TrainTrace& want, double loss_rtol, double param_atol);

// Gives ATen one intra-op CPU thread (at::set_num_threads(1)) before the binary's first test, as
// the rank workers use: the models are tiny, and OpenMP's spinning threads are many times slower
// than one on a busy 2-core machine. Register it once per test binary, at namespace scope:
//   ::testing::Environment* const kOneCpuThread = ::testing::AddGlobalTestEnvironment(new OneCpuThread);
class OneCpuThread : public ::testing::Environment {
 public:
  void SetUp() override;
};

}  // namespace tierzero::engine::testing
