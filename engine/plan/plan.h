// The planner behind `tierzero estimate`: the bytes a training run holds in each tier (GPU,
// pinned host, pageable host, NVMe) and its predicted step time, from the model's shape, the
// ds_config and the machine's measured bandwidths — before anything is allocated. No LibTorch.
//
// Memory follows what the engine does (engine/zero, engine/model), per rank:
//   parameters   16-bit compute copy: stages 0-2 the whole (padded) model on the GPU; stage 3 this
//                rank's shard (on the GPU, or in host memory with offload_param), parameters of at
//                most stage3_param_persistence_threshold elements whole on every rank, and the
//                gathered ones: at most max(stage3_max_live_parameters, the largest unit) whole at
//                once plus the all-gather buffers of stage3_prefetch_bucket_size ahead.
//   gradients    this rank's partition in the grad dtype (tierzero.grad_accum_dtype) on the GPU, or
//                in pinned host memory when the optimizer is offloaded (fp32, or bf16 with
//                tierzero.offload_grad_dtype); up to three reduce
//                buckets of reduce_bucket_size elements alive on the GPU; one unit's 16-bit
//                parameter gradients as backward produces them; offloaded: offload_optimizer.buffer_count
//                pinned staging slots of the largest bucket landed, at most 64 MiB each.
//   optimizer    fp32 master + m + v (12 B/element) on the GPU, or offloaded in the layout of
//                engine/layout/layout.h (master 4 B, or 2 with tierzero.master_weights "compact", the bf16
//                weights holding the other half; m + v 8, 4 with bf16, 2 + 4 B per 256 elements
//                with int8): in pinned host memory (offload_optimizer "cpu", plus the 16-bit
//                weights bound for the GPU), or on NVMe (offload_optimizer "nvme", with buffer_count
//                swap buffers of a sub-group's record in pinned memory; the first
//                optimizer_records_in_memory records in pinned memory instead, neither in a swap
//                file nor moved).
//   activations  each unit keeps its input ([micro_batch, seq, hidden] in the compute dtype; token
//                ids for the embedding); backward recomputes one unit at a time (a decoder layer's
//                attention and MLP intermediates, or the LM head's fp32 logits [micro_batch * seq,
//                vocab] with the loss's log-softmax and both gradients).
//   buffers      the CUDA context (~500 MB, outside the allocator's counter), LibTorch's host
//                runtime, what the trainer's weight source holds at start-up (a 64 MiB fp32
//                piece, and a checkpoint's 2 MiB read buffer a core).
// Every pinned buffer and swap file of the offloaded step (and of a LoRA base pinned or on NVMe) is
// sized by engine/layout/layout.h, the functions the engine allocates with: the pools' block
// alignment and page rounding and the swap files' 4096-byte rounding included, so the pinned and
// NVMe figures are the engine's to the byte.
// A tier's peak is its resident bytes plus the largest phase (backward, optimizer step, start-up).
//
// Step time: each resource's busy time for one optimizer step per rank (GPU compute with
// recomputation, PCIe each way, CPU Adam, NVMe reads at the read rate plus writes at the write rate:
// the disk serves the step one direction at a time, time_terms.cpp). Gradients leave the GPU once per
// micro-batch, or once per step with the device accumulator or the window (window_pass.h: the
// forwards and the backwards run unit by unit across the micro-batches, so stage 3 gathers each
// unit twice a step); in fp32 when summed on the GPU, bf16 with tierzero.offload_grad_dtype. The predicted step is the slowest
// of them (the engine's target pipeline overlaps all of them), or, when the optimizer step follows
// into the forward, max(forward, cpu adam, nvme) + backward if that is longer (the backward waits for
// the optimizer: it lands the gradients the optimizer reads); their sum is printed as the bound with
// no overlap at all.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "engine/config/ds_config.h"

namespace tierzero::engine {

// The shape of a decoder-only Llama / Qwen2 / Qwen3 / Mistral / Phi-3 / Gemma 2-3 model: the
// fields of a Hugging Face config.json the planner needs.
struct ModelDims {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;  // defaults to num_attention_heads
  int64_t head_dim = 0;             // defaults to hidden_size / num_attention_heads
  bool tie_word_embeddings = false;
  bool qkv_bias = false;     // Qwen2 always; Llama, Qwen3, Gemma with attention_bias
  bool o_proj_bias = false;  // Llama, Qwen3, Gemma with attention_bias
  bool mlp_bias = false;     // Llama with mlp_bias
  bool qk_norm = false;      // Qwen3, Gemma 3: q_norm and k_norm over head_dim
  bool fused_projections = false;  // Phi-3: one qkv_proj and one gate_up_proj per layer
  bool sandwich_norms = false;     // Gemma: pre/post feed-forward norms too (4 per layer)
  // Gemma 2 with attn_logit_softcapping: attention runs transformers' eager path, which holds
  // [heads, T, T] scores per sequence.
  bool eager_attention = false;
};

// Reads a HF config.json's text; `origin` names it in errors. kInvalidArgument names the key
// (missing, not a positive integer, heads not dividing). model_type decides the layout as
// transformers does (qwen2: q/k/v biases; llama, qwen3, gemma: attention_bias; llama: mlp_bias;
// the family's head_dim and tie_word_embeddings defaults; q/k norms, fused and extra norms).
Result<ModelDims> parse_model_dims(std::string_view json_text, const std::string& origin);
// Same, from a config.json file or a directory holding one; kNotFound names the file.
Result<ModelDims> load_model_dims(const std::string& path);
// Parameters of the model, a tied embedding counted once.
int64_t parameter_count(const ModelDims& model);
namespace plan {
// Elements of each unit's parameters as the engine lays the model out (unit 0 the embedding, units
// 1..L the decoder layers, unit L+1 the final norm and LM head; a tied LM head counted in the last
// unit too).
std::vector<int64_t> unit_numels(const ModelDims& model);
// Device bytes the window pass (engine/zero's window_pass.h) holds beyond what one micro-batch run
// micro-batch-major holds, for `micro_batches` micro-batches of `tokens` tokens each over `units`
// units: (micro_batches - 1) more inputs of every unit but the last plus an output gradient (hidden
// states of `hidden_size` in `compute_bytes`), and the fp32 gradient sums of the largest unit
// (`largest_unit` elements). 0 for one micro-batch. The engine decides with it and the planner plans
// with it, so the two agree by construction.
uint64_t window_bytes(int64_t micro_batches, int64_t tokens, int64_t hidden_size, int64_t units,
                      int64_t largest_unit, int compute_bytes);
}  // namespace plan

// One figure of the machine and where it came from ("bench pcie FILE", "default: ...", "--flag").
struct MachineFigure {
  double value = 0.0;
  std::string source;
};

// What the machine offers. Budgets of 0 are not checked.
struct Machine {
  uint64_t gpu_memory_bytes = 0;    // --gpu-memory: a GPU's memory (the CUDA context included)
  uint64_t host_memory_bytes = 0;   // --host-memory: pinned + pageable
  // Where those two budgets came from, as the checks name them ("this machine's MemAvailable").
  std::string gpu_memory_source = "--gpu-memory";
  std::string host_memory_source = "--host-memory";
  uint64_t nvme_bytes = 0;          // free bytes on the NVMe paths
  std::string nvme_source = "free space on the NVMe paths";  // where nvme_bytes came from ("--nvme-space")
  std::string gpu_name;             // e.g. "NVIDIA H200" (from bench pcie, or --gpu)
  MachineFigure gpu_tflops;         // dense 16-bit matmul TFLOPS
  double compute_efficiency = 0.60;  // fraction of gpu_tflops a training step sustains: 2026-12-07's H100 lease
                                     // (RESULTS.md): the 14B's 1.97 PFLOP in 3.64 s of kernels (0.68), the
                                     // 1.35B's GPU-bound 0.75 s step (>= 0.51); the estimated steps of those,
                                     // the 14B unclipped and the 7.6B fell within 6 % of the measured ones;
                                     // benchmarks/estimate_vs_measured.sh prints a run's own
  MachineFigure h2d_gbps;           // pinned host -> GPU, GB/s (1e9 B/s)
  MachineFigure d2h_gbps;           // GPU -> pinned host
  MachineFigure nvme_read_gbps;   // sequential, one direction (bench io's read row, bench tiers' stream)
  MachineFigure nvme_write_gbps;
  MachineFigure adam_gbps;  // CPU Adam: GB/s of host memory its step reads and writes, whatever the
                            // state's layout (parameters a second: this / Layout::cpu_step_bytes)
};

// The figures of the reference GPU box (H200 790 TFLOPS, pinned PCIe Gen5 45 / 50 GB/s, virtio disk
// 2.0 / 3.0 GB/s) and the CPU Adam of the H100 box (106 GB/s on 16 cores), each sourced
// "default: ...". No budgets.
Machine default_machine();

// Dense 16-bit matmul TFLOPS of a GPU named `gpu_name` (a substring match, case-insensitive:
// "H200", "H100", "A100", "L40S", "RTX 4090", ...); kNotFound lists the names known.
Result<double> gpu_tflops_for(std::string_view gpu_name);

// Takes the figures a `tierzero bench pcie|io|adam|tiers --json` file measured into `machine`:
// pcie: the best pinned h2d / d2h tierzero_GB/s, and the GPU's name; io: the best read / write
// GB/s (its mixed and pipe/ rows are not rates the planner prices: time_terms.cpp); adam: the best Gparam/s; tiers: tierzero's NVMe read / write streams (preferred over io's,
// as they go through offload/ as training does). A file that measured nothing (bench pcie without
// a GPU) changes nothing. Errors name the file: unreadable, not JSON, not a tierzero bench file,
// a row without the column its title needs.
Status apply_bench_file(const std::string& path, Machine& machine);

enum class Tier : uint8_t { kGpu, kPinned, kPageable, kNvme };
// "gpu", "pinned", "pageable" or "nvme".
const char* tier_name(Tier tier);

// When an item is held: all the time, or only during one phase. A tier's peak is its resident
// bytes plus the largest of its phases.
enum class Phase : uint8_t { kResident, kBackward, kStep, kStartup };
// "resident", "backward", "step" or "start-up".
const char* phase_name(Phase phase);

// One line of the table: `bytes` of `what` in `tier`, and how they were computed.
struct MemoryItem {
  Tier tier = Tier::kGpu;
  std::string what;  // "optimizer state (fp32 master, m, v)"
  Phase phase = Phase::kResident;
  uint64_t bytes = 0;
  std::string formula;  // "12 B x 1.35e9 elements"
};

// A peak against its budget (0: none given). Host and NVMe checks count every rank of the host.
struct TierCheck {
  std::string name;  // "gpu", "gpu allocated", "pinned", "pageable", "host", "nvme"
  uint64_t peak_bytes = 0;
  uint64_t budget_bytes = 0;
  std::string budget_source;  // "--gpu-memory", "tierzero.pinned_memory_limit", ...; "" without a budget
  bool over() const { return budget_bytes > 0 && peak_bytes > budget_bytes; }
};

// One resource's busy time per optimizer step.
struct TimeTerm {
  std::string what;  // "gpu compute", "pcie h2d", "pcie d2h", "cpu adam", "nvme"
  double seconds = 0.0;
  std::string detail;  // "8.1e15 FLOP / (790 TFLOPS x 0.60)"
};

// One row of the state layout's table: bytes per parameter of this rank's partition that `what`
// holds in each tier (averaged: records in memory split the state between pinned and NVMe).
struct StateBytes {
  std::string what;  // "16-bit weights", "master", "m, v", "gradients", "total"
  double gpu = 0.0, pinned = 0.0, pageable = 0.0, nvme = 0.0;
  double total() const { return gpu + pinned + pageable + nvme; }
};

struct Plan {
  // What was planned.
  int64_t parameters = 0;
  int stage = 0;
  int world_size = 1;
  std::string precision;         // "bf16", "fp16", "fp32"
  std::string optimizer_device;  // "none", "cpu", "nvme"
  std::string param_device;
  std::string optimizer_state;  // "fp32", "bf16" or "int8" (m, v)
  std::string master_weights;   // "fp32" or "compact"
  std::string offload_grad_dtype;  // "fp32" or "bf16": the offloaded optimizer's host gradients
  int64_t optimizer_records = 0;   // offload_optimizer "nvme": sub-group records of the partition
  int64_t optimizer_records_in_memory = 0;  // of them kept in pinned memory (optimizer_records_in_memory)
  int64_t micro_batch = 0;
  int64_t seq_len = 0;
  int64_t gradient_accumulation_steps = 0;
  int64_t tokens_per_step = 0;  // per rank
  int64_t window_group = 1;     // micro-batches the window runs as one batch (tierzero.window_group resolved)
  int64_t kept_layers = 0;      // decoder layers the window does not recompute (tierzero.kept_activations resolved)

  std::vector<MemoryItem> items;
  std::vector<StateBytes> state_bytes;  // the state layout per tier: weights, master, m + v, gradients, total
  std::vector<TierCheck> checks;          // gpu (with the CUDA context), gpu allocated, pinned, pageable,
                                          // host (pinned + pageable, all ranks), nvme (all ranks)
  uint64_t gpu_allocated_peak_bytes = 0;  // the GPU peak without the CUDA context: what CUDA's
                                          // peak-allocated counter (and `train`'s gpu-peak) shows
  uint64_t gpu_allocated_base_bytes = 0;  // the same without what the engine adds when it finds room
                                          // (a device gradient accumulator, a forward window): the peak
                                          // the engine makes those choices against

  std::vector<TimeTerm> time_terms;
  double step_seconds = 0.0;         // the slowest term
  double serial_step_seconds = 0.0;  // the sum of the terms
  std::string bottleneck;            // the slowest term's `what`

  std::vector<std::string> problems;  // each: what is over, by how much, which key to change
  std::vector<std::string> notes;     // assumptions and figures taken from defaults

  bool feasible() const { return problems.empty(); }
};

// What a plan needs beyond the config and the machine.
struct PlanOptions {
  int64_t seq_len = 0;          // tokens per sample; 0: the config's tierzero.data.seq_len
  bool compute_on_cpu = false;  // a run without a GPU (`train` on the CPU): no 16-bit weights bound for a
                                // GPU, and tierzero.gpu_memory_limit, which the engine ignores there, unchecked
  bool weights_from_checkpoint = false;  // the weights are read from a model directory's safetensors
                                         // (`train --model DIR`), not drawn at random
};

// The directories `config`'s NVMe offload writes to: offload_optimizer's nvme_path list, then
// offload_param's, for the blocks whose device is "nvme"; each directory once.
std::vector<std::string> config_nvme_paths(const DsConfig& config);
// Free bytes for an unprivileged writer on the file systems holding `paths` (directories), each file
// system counted once. kNotFound names a path that does not exist and kInvalidArgument one that is
// not a directory, each with `what` (the key or flag it came from) and the fix.
Result<uint64_t> nvme_free_bytes(const std::vector<std::string>& paths, const std::string& what);

// Plans `config` (parsed with parse_ds_config for the world size and model it runs) for `model`
// on `machine`. Budgets that cannot be met become Plan::problems, each naming the key to change
// and what the change gives, re-planned; so does a gradient ring (tierzero.grad_ring_records, one
// check_engine_settings accepts) whose window of micro-batches does not fit the GPU, as the engine
// would refuse its first step. An infeasible plan is still a value. Errors
// (kInvalidArgument) only for inputs no plan can be made from (a zero size, a model that does not
// divide).
Result<Plan> plan_training(const ModelDims& model, const DsConfig& config, const Machine& machine,
                           const PlanOptions& options = {});

// `tierzero estimate --suggest`: the layout with the smallest predicted step that fits every budget
// of `machine` (GPU, host, NVMe). Tried, each as stage 3 from `base` (its batch, optimizer, aio and
// the rest kept): the offload devices (optimizer none / cpu / nvme; the parameters none / cpu / nvme
// beside an offloaded optimizer) x the state layouts, least lossy first (fp32; the compact master;
// + bf16 moments; + bf16 host gradients; int8 moments instead; the last two with an fp32 master),
// those check_engine_settings refuses left out. On NVMe, sub_group_size at most 1e8, `nvme_paths`
// where `base` names no nvme_path (neither: no NVMe layout is tried), and offload_optimizer.buffer_count
// as `base` has it and 2 (the read-ahead depth it gives up is not in the time terms). The host budget is spent as the bytes each byte held saves a
// step: tierzero.pinned_memory_limit is what the host leaves beside the pageable peak, the weights
// take it first (offload_param.max_in_cpu: a weight held saves reading it twice and writing it once)
// and the optimizer's records the rest (optimizer_records_in_memory "auto": a record byte held saves
// one read and one write). Each layout with the optimizer offloaded and the weights not on NVMe is
// also tried right after itself with the gradient ring (tierzero.grad_ring_records: the fewest slots
// the backward needs, when fewer than the partition's records), which leaves the host room to more
// records, where the config allows it (check_engine_settings: no gradient clipping, one rank, bf16 or
// fp32, overlap_comm, gradient_accumulation_steps >= 2) and the window it steps in fits the GPU; the
// base's own grad_ring_records is not kept. A note says when the ring is chosen and the step it
// saves, or why it was not tried; with clipping its only bar, what the fastest ring layout that fits
// would predict with gradient_clipping 0. Chosen: the fastest that fits; of those within 1% of it,
// the first tried (least lossy, then least offloaded, then the config's buffer_count, then without
// the ring); when none fits, the least over (peak / budget), whose plan then has problems.
// kInvalidArgument as plan_training, or when the engine accepts no layout.
struct SuggestionTried {
  std::string layout;  // "optimizer nvme, parameters cpu; compact master, int8 m, v, bf16 host gradients; 5 of 148 records in memory"
  double step_seconds = 0.0;
  std::string over;  // the checks over ("host 70.10 GiB > 64.00 GiB"); "" when it fits
};
struct Suggestion {
  DsConfig config;  // the chosen layout: `base` with its keys set (to_json writes it as a ds_config)
  Plan plan;        // plan_training of it
  std::vector<SuggestionTried> tried;  // every layout planned, in the order tried
  size_t chosen = 0;                   // its index in `tried`
  std::vector<std::string> notes;      // what was not tried and why
};
Result<Suggestion> suggest_layout(const ModelDims& model, const DsConfig& base, const Machine& machine,
                                  const PlanOptions& options, const std::vector<std::string>& nvme_paths);

// The plan as the estimate command prints it: a '#' header, the state layout's bytes per parameter
// per tier, the table of items (tier, what, when, bytes, formula), the tier checks (peak, budget, OK/OVER), the time terms, and a footer with the
// verdict and the problems. `header` lines (without '#') open it.
std::string format_plan(const Plan& plan, const std::vector<std::string>& header);

// The plan as JSON, field for field, with each check's "over" and the plan's "feasible".
nlohmann::json plan_to_json(const Plan& plan);

}  // namespace tierzero::engine
