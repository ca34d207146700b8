// The DeepSpeed config (ds_config JSON), accepted as is, with DeepSpeed's defaults, checks and
// batch-size derivation, plus tierzero's own section.
//
// Numbers may be JSON numbers or strings ("5e8", and byte sizes like "24GB" where a key holds
// bytes).
//
// "auto" (the Hugging Face Trainer convention) is resolved where the HF Trainer fills it, from the
// values `tierzero train`'s flags give (TrainerFlags), and otherwise refused naming the flag; never
// a silent default (configs/README.md, "auto", has the table):
//   train_micro_batch_size_per_gpu: --micro-batch; gradient_accumulation_steps: --grad-accum; each
//       also derived, as DeepSpeed derives an absent one, when the other two of the triad are given;
//   train_batch_size: micro * accumulation * world size;
//   gradient_clipping: --max-grad-norm;
//   optimizer.params.lr: --lr; betas: --adam-beta1 and --adam-beta2; eps: --adam-epsilon;
//       weight_decay: --weight-decay;
//   scheduler.params.warmup_min_lr: 0 (as the HF Trainer fills it); warmup_max_lr: the optimizer's
//       lr; warmup_num_steps: --warmup-steps (0 fills 1, as the HF Trainer fills max(1, warmup_steps));
//       total_num_steps: ResolveHints::total_steps (--steps);
//   fp16.enabled / bf16.enabled: --fp16 / --bf16 (one of them must be given);
//   zero_optimization.reduce_bucket_size: hidden^2; stage3_prefetch_bucket_size: 0.9 * hidden^2;
//       stage3_param_persistence_threshold: 10 * hidden (ModelShape::hidden_size; refused without);
//   tierzero.data.seq_len: --seq-len.
// Every "auto" the flags given cannot fill is reported in one error, each with the flag that fills it.
// "auto" anywhere else is an error. A flag also fills its key when the key is absent; where the
// key holds a value the flag disagrees with, that is an error (as the HF Trainer's mismatch check),
// except --seq-len, which overrides tierzero.data.seq_len as --data overrides tierzero.data.path.
// An absent total_num_steps (WarmupDecayLR, WarmupCosineLR) is ResolveHints::total_steps too.
// resolved_config_text() prints the result with every default filled in.
//
// No optimizer section (the Hugging Face Trainer then builds its own optimizer and schedule):
// `tierzero train` (ResolveHints::training) refuses the config unless --lr is given, naming --lr and
// the optimizer section; with --lr the optimizer is the HF Trainer's default AdamW (betas (0.9,
// 0.999), eps 1e-8, weight decay 0: --adam-beta1, --adam-beta2, --adam-epsilon set them; a weight
// decay is refused, as the HF Trainer exempts biases and norm weights from it and tierzero's AdamW
// does not), and without a scheduler section too, the HF Trainer's default schedule: linear warm-up
// over --warmup-steps (0 when not given), then linear decay to 0 at --steps (LrScheduleType::kLinear,
// transformers' get_linear_schedule_with_warmup). optimizer_summary() says which, for the run header.
//
// One DeepSpeed key takes more than DeepSpeed does: zero_optimization.offload_optimizer.nvme_path and
// offload_param.nvme_path may be a list of distinct directories (striped over; a tierzero
// extension) as well as DeepSpeed's one string; to_json() writes one path as a string.
//
// Every key DeepSpeed 0.19.8 reads is accepted (tests/engine/config/deepspeed_keys.txt lists them,
// generated from DeepSpeed by deepspeed_keys.py), and so are the attribute names of DeepSpeed's config
// object, which DeepSpeed prints as its configuration and ignores as keys (comms_config,
// monitor_config, ...). Unknown keys are errors, as DeepSpeed's config models refuse extra keys (at
// the top level DeepSpeed ignores them silently, which hides a misspelt key): each names its JSON
// path and the nearest known key ("did you mean offload_optimizer?"). A key DeepSpeed knows but
// tierzero does not act on is in the registry (below) and warns: one warning lists every such key
// set, each with why. tierzero.ignore_unknown_keys lists the paths of keys of other tools to pass
// over with a warning. A key given twice in one object is an error naming its path and lines (as
// DeepSpeed refuses a file with duplicate keys). Contradictions are errors (kInvalidArgument) naming
// the key and the fix.
//
// The `tierzero` section (extensions; DeepSpeed ignores it):
// | key                          | type                   | default | meaning                                 |
// |------------------------------|------------------------|---------|-----------------------------------------|
// | tierzero.gpu_memory_limit    | bytes ("24GB")         | 0       | GPU pool budget; 0 = the whole device    |
// | tierzero.pinned_memory_limit | bytes                  | 0       | pinned host budget; 0 = no limit set     |
// | tierzero.cpu_threads         | integer >= 0           | 0       | CPU Adam and save-copy threads; 0 = all  |
// | tierzero.grad_accum_dtype    | "fp32" or "bf16"       | "fp32"  | dtype gradients accumulate in            |
// | tierzero.optimizer_state_dtype | "fp32", "bf16" or  | "fp32"  | the offloaded optimizer's m, v: fp32 8   |
// |                              | "int8"                 |         | B/param, bf16 4, int8 2 (8-bit blockwise:|
// |                              |                        |         | int8 m, uint8 v, an fp32 scale per 256   |
// |                              |                        |         | elements; not exact); needs an offloaded |
// |                              |                        |         | optimizer                                |
// | tierzero.master_weights      | "fp32" or "compact"    | "fp32"  | the offloaded optimizer's master: fp32 4 |
// |                              |                        |         | B/param, or "compact": the bf16 weights  |
// |                              |                        |         | (rounded to nearest, ties away from 0)   |
// |                              |                        |         | + a 16-bit residual, exact in 2 B/param; |
// |                              |                        |         | needs bf16 and an offloaded optimizer    |
// | tierzero.offload_grad_dtype  | "fp32" or "bf16"       | "fp32"  | the offloaded optimizer's host gradient  |
// |                              |                        |         | partition: 4 or 2 B/param (bf16: summed  |
// |                              |                        |         | in fp32 on the GPU, rounded once a step  |
// |                              |                        |         | as it crosses PCIe); needs an offloaded  |
// |                              |                        |         | optimizer                                |
// | tierzero.grad_ring_records   | integer >= 0           | 0       | the host gradients land in N record-     |
// |                              |                        |         | sized slots (sub_group_size each), freed |
// |                              |                        |         | as the optimizer reads each record inside|
// |                              |                        |         | the window's backward, instead of the    |
// |                              |                        |         | whole partition; needs that step (no     |
// |                              |                        |         | clipping, one rank, stage 3) and N >= the|
// |                              |                        |         | records a unit spans (the engine says);  |
// |                              |                        |         | 0: the partition                         |
// | tierzero.optimizer_records_in_memory | integer >= 0 | 0       | offload_optimizer "nvme" only: the first |
// |                              | or "auto"              |         | N sub-group records stay in pinned       |
// |                              |                        |         | memory (no NVMe traffic, no swap file);  |
// |                              |                        |         | "auto": as many as pinned_memory_limit   |
// |                              |                        |         | holds (needs it); 0: all on NVMe, the    |
// |                              |                        |         | buffer_count swap buffers keeping the    |
// |                              |                        |         | turn's records (DeepSpeed's behaviour)   |
// | tierzero.gpu_optimizer_share | number in [0, 1)      | 0       | the offloaded optimizer's elements the   |
// |                              |                        |         | GPU steps after the backward while the   |
// |                              |                        |         | CPU steps the rest, bit for bit the CPU's|
// |                              |                        |         | (device_share.h); needs a CUDA device and|
// |                              |                        |         | tierzero.master_weights "compact"        |
// | tierzero.window_group        | integer >= 1 or "auto" | "auto"  | micro-batches the window (window_pass.h) |
// |                              |                        |         | runs as one batch through each decoder   |
// |                              |                        |         | layer; a divisor of the accumulation     |
// |                              |                        |         | steps; "auto": on a GPU the largest that |
// |                              |                        |         | fits its budget, 1 without a GPU         |
// | tierzero.kept_activations    | integer >= 0 or "auto" | 0       | decoder layers, the last ones, whose     |
// |                              |                        |         | forward graphs the window keeps for the  |
// |                              |                        |         | backward instead of recomputing them     |
// |                              |                        |         | (window_pass.h); "auto": on a GPU as many|
// |                              |                        |         | as fit its budget, 0 without a GPU       |
// | tierzero.offload_grad_accumulator | "auto", "device",  | "auto"  | where an offloaded optimizer's step sums |
// |                              | or "host"              |         | micro-batches (zero_engine.h)            |
// | tierzero.checkpoint.compression | "none" or "zstd"    | "none"  | engine checkpoint compression            |
// | tierzero.checkpoint.level    | integer 1..22          | 3       | zstd level                               |
// | tierzero.checkpoint.save_every | integer >= 0         | 0       | save every N steps; 0 = at the end only  |
// | tierzero.checkpoint.keep_last | integer >= 0          | 0       | checkpoints periodic saves keep; 0 = all |
// | tierzero.checkpoint.write_behind | bytes or "auto"    | "auto"  | host memory a periodic save's state is   |
// |                              |                        |         | copied into ahead of the disk, so the    |
// |                              |                        |         | optimizer waits at memory speed; "auto": |
// |                              |                        |         | the rank's checkpoint bytes, at most     |
// |                              |                        |         | half of MemAvailable once the engine is  |
// |                              |                        |         | built; 0: read at the disk's rate        |
// | tierzero.data.path           | string                 | ""      | token file or JSONL (token_data.h);      |
// |                              |                        |         | relative to the working directory        |
// | tierzero.data.seq_len        | integer > 0            | 256     | tokens a sample predicts                 |
// | tierzero.data.seed           | integer >= 0           | 1234    | shuffle seed                             |
// | tierzero.data.dtype          | "uint16" / "uint32"    | ""      | token width of a headerless file         |
// | tierzero.lora.*              | object (LoraConfig)    | absent  | LoRA over a frozen base (configs/README) |
// | tierzero.ignore_unknown_keys | list of key paths      | []      | keys of other tools passed over (warned) |
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/common.h"
#include "engine/optim/schedules.h"
#include "nvme/io_engine.h"

namespace tierzero::engine {

// What the parser may resolve "auto" and the batch triad from.
struct ModelShape {
  int64_t hidden_size = 0;  // 0: unknown ("auto" bucket sizes are refused)
};
// The values of `tierzero train`'s flags that stand for the HF Trainer's arguments; each unset when
// its flag is not given.
struct TrainerFlags {
  std::optional<int64_t> micro_batch_size;             // --micro-batch
  std::optional<int64_t> gradient_accumulation_steps;  // --grad-accum
  std::optional<double> lr;                            // --lr
  std::optional<int64_t> warmup_steps;                 // --warmup-steps
  std::optional<double> max_grad_norm;                 // --max-grad-norm
  std::optional<double> adam_beta1;                    // --adam-beta1
  std::optional<double> adam_beta2;                    // --adam-beta2
  std::optional<double> adam_epsilon;                  // --adam-epsilon
  std::optional<double> weight_decay;                  // --weight-decay
  bool bf16 = false;                                   // --bf16
  bool fp16 = false;                                   // --fp16
  std::optional<int64_t> seq_len;                      // --seq-len
};
struct ResolveHints {
  int world_size = 1;  // data-parallel ranks
  ModelShape model = {};
  int64_t total_steps = 0;  // optimizer steps planned (--steps); 0: unknown
  TrainerFlags flags = {};
  bool training = false;  // `tierzero train`: the lr must come from the optimizer section or --lr
};

// train_batch_size == train_micro_batch_size_per_gpu * gradient_accumulation_steps * world_size.
struct BatchConfig {
  int64_t train_batch_size = 0;
  int64_t train_micro_batch_size_per_gpu = 0;
  int64_t gradient_accumulation_steps = 0;
  int world_size = 1;
};

struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;
  LossScalerConfig loss_scaler;  // loss_scale, initial_scale_power, loss_scale_window, ...
};

struct Bf16Config {
  bool enabled = false;
};

enum class Precision : uint8_t { kFp32, kFp16, kBf16 };
enum class OffloadDevice : uint8_t { kNone, kCpu, kNvme };
// Returns "none", "cpu" or "nvme".
const char* offload_device_name(OffloadDevice device);

// zero_optimization.offload_param (valid with stage 3 only).
struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::vector<std::string> nvme_paths;  // nvme_path: a directory (DeepSpeed), or a list of them to stripe
                                        // over (a tierzero extension); at least one for kNvme
  int64_t buffer_count = 5;
  uint64_t buffer_size = 100'000'000;   // elements per buffer
  uint64_t max_in_cpu = 1'000'000'000;  // elements kept in CPU memory with NVMe offload
  bool pin_memory = false;
};

// zero_optimization.offload_optimizer (stages 1-3; ratio < 1 with stage 3 only).
struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::vector<std::string> nvme_paths;  // nvme_path, as OffloadParamConfig's
  int64_t buffer_count = 4;
  bool pin_memory = false;
  bool pipeline_read = false;
  bool pipeline_write = false;
  double ratio = 1.0;  // fraction of optimizer state on the CPU, in [0, 1]
};

// zero_optimization. Sizes are element counts, as in DeepSpeed. The stage3_* keys are also
// accepted without the prefix (DeepSpeed's field names).
struct ZeroConfig {
  int stage = 0;  // 0..3
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  bool allgather_partitions = true;
  bool overlap_comm = false;  // DeepSpeed default: true for stage 3, false otherwise
  bool round_robin_gradients = false;
  uint64_t reduce_bucket_size = 500'000'000;
  uint64_t allgather_bucket_size = 500'000'000;
  uint64_t sub_group_size = 1'000'000'000;
  uint64_t prefetch_bucket_size = 50'000'000;       // stage3_prefetch_bucket_size
  uint64_t param_persistence_threshold = 100'000;   // stage3_param_persistence_threshold
  uint64_t max_live_parameters = 1'000'000'000;     // stage3_max_live_parameters
  uint64_t max_reuse_distance = 1'000'000'000;      // stage3_max_reuse_distance
  bool gather_16bit_weights_on_model_save = false;  // stage3_gather_16bit_weights_on_model_save
  OffloadParamConfig offload_param;
  OffloadOptimizerConfig offload_optimizer;
};

enum class OptimizerType : uint8_t { kAdam, kAdamW };
// Returns "Adam" or "AdamW".
const char* optimizer_type_name(OptimizerType type);

// optimizer {type, params}, with DeepSpeed's defaults for absent params. No optimizer section: AdamW
// with these defaults, the HF Trainer's but for the lr (--lr; see the top of this file).
// params.amsgrad is accepted only as false (no AMSGrad kernel); params.max_grad_norm is refused
// as DeepSpeed refuses it (use gradient_clipping).
struct OptimizerConfig {
  OptimizerType type = OptimizerType::kAdam;
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  bool adam_w_mode = true;  // as written; see decoupled_weight_decay()
  bool torch_adam = false;

  // DeepSpeed's effective_adam_w_mode: type AdamW, or Adam with adam_w_mode (its default true).
  bool decoupled_weight_decay() const { return type == OptimizerType::kAdamW || adam_w_mode; }
};

// activation_checkpointing. tierzero recomputes each layer in backward regardless (docs/design.md:
// the layer is the unit the engine fetches, runs and recomputes); these are kept so configs round-trip.
struct ActivationCheckpointingConfig {
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  int64_t number_checkpoints = 0;  // 0: null
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

enum class GradAccumDtype : uint8_t { kFp32, kBf16 };
// The element type of the offloaded optimizer's moments m and v: fp32, bf16, or 8-bit blockwise codes
// (int8 m, uint8 v, an fp32 scale per 256 elements).
enum class OptimizerStateDtype : uint8_t { kFp32, kBf16, kInt8 };
// "fp32", "bf16" or "int8".
const char* optimizer_state_dtype_name(OptimizerStateDtype dtype);
// How the offloaded optimizer holds the fp32 master (tierzero.master_weights): 4 B/param, or exact
// in 2 (the bf16 compute weights + a 16-bit residual).
enum class MasterWeights : uint8_t { kFp32, kCompact };
// "fp32" or "compact".
const char* master_weights_name(MasterWeights master);
// The offloaded optimizer's host gradient partition (tierzero.offload_grad_dtype).
enum class OffloadGradDtype : uint8_t { kFp32, kBf16 };
// tierzero.optimizer_records_in_memory "auto": as many records as tierzero.pinned_memory_limit holds
// (ZeroEngineOptions' kRecordsByBudget).
inline constexpr int64_t kOptimizerRecordsAuto = -1;
// tierzero.window_group "auto": the planner picks the largest group that fits (engine/plan).
inline constexpr int64_t kWindowGroupAuto = 0;
// tierzero.kept_activations "auto": the planner keeps as many layers' graphs as fit (engine/plan).
inline constexpr int64_t kKeptActivationsAuto = -1;
// tierzero.checkpoint.write_behind "auto" (engine/train's write_behind.h resolves it).
inline constexpr int64_t kWriteBehindAuto = -1;
// Where an offloaded optimizer's step sums the micro-batches of a window (GPU or host memory).
enum class OffloadGradAccumulator : uint8_t { kAuto, kDevice, kHost };
// "auto", "device" or "host".
const char* offload_grad_accumulator_name(OffloadGradAccumulator accumulator);
enum class CheckpointCompression : uint8_t { kNone, kZstd };

// tierzero.lora: LoRA adapters trained over the frozen model, with PEFT LoraConfig's names and
// meanings (engine/model/functional_model.h, LoRA). Absent: full fine-tuning.
struct LoraConfig {
  int64_t r = 8;              // rank
  double lora_alpha = 8.0;    // scaling = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora)
  double lora_dropout = 0.0;  // [0, 1): PEFT's dropout on the adapters' inputs
  // Linear modules to adapt, as PEFT matches them: a list of names, each matching a module path
  // equal to it or ending in "." + it; or one string: "all-linear" (every linear but the LM head)
  // or a regular expression the whole module path must match.
  std::vector<std::string> target_modules{"q_proj", "v_proj"};  // PEFT's default for Llama / Qwen2 / Mistral
  std::string target_pattern;                                   // the one-string form; "" when a list
  std::string bias = "none";                                    // only "none" is accepted
  bool use_rslora = false;
  std::string init_adapter;  // a PEFT adapter directory to start from; "" = fresh (PEFT's init)
};

// Whether LoRA adapts the linear module at `module_path` ("model.layers.0.self_attn.q_proj"), as
// PEFT matches target_modules: a list entry matches the path itself or its trailing components;
// `target_pattern` (when not empty) is "all-linear" (every module given) or a regular expression
// the whole path must match (parse_ds_config checked that it is valid; an invalid one matches
// nothing).
bool lora_targets_module(const std::vector<std::string>& target_modules, const std::string& target_pattern,
                         const std::string& module_path);

// The `tierzero` section (table above).
struct TierzeroConfig {
  uint64_t gpu_memory_limit = 0;
  uint64_t pinned_memory_limit = 0;
  int cpu_threads = 0;
  GradAccumDtype grad_accum_dtype = GradAccumDtype::kFp32;
  OptimizerStateDtype optimizer_state_dtype = OptimizerStateDtype::kFp32;
  MasterWeights master_weights = MasterWeights::kFp32;
  OffloadGradDtype offload_grad_dtype = OffloadGradDtype::kFp32;
  int64_t optimizer_records_in_memory = 0;  // >= 0, or kOptimizerRecordsAuto
  int64_t grad_ring_records = 0;            // >= 0; 0: the whole host gradient partition
  double gpu_optimizer_share = 0.0;         // [0, 1): the offloaded optimizer's elements stepped on the GPU
  int64_t window_group = kWindowGroupAuto;  // >= 1, or kWindowGroupAuto: micro-batches a window runs at once
  int64_t kept_activations = 0;             // >= 0, or kKeptActivationsAuto: decoder layers not recomputed
  OffloadGradAccumulator offload_grad_accumulator = OffloadGradAccumulator::kAuto;
  CheckpointCompression checkpoint_compression = CheckpointCompression::kNone;
  int checkpoint_compression_level = 3;
  int64_t checkpoint_save_every = 0;
  int64_t checkpoint_keep_last = 0;
  int64_t checkpoint_write_behind = kWriteBehindAuto;  // bytes >= 0, or kWriteBehindAuto
  std::string data_path;
  int64_t data_seq_len = 256;
  uint64_t data_seed = 1234;
  std::string data_dtype;  // "", "uint16" or "uint32"
  std::optional<LoraConfig> lora;
};

// A parsed, checked and resolved ds_config.
struct DsConfig {
  BatchConfig batch;
  Fp16Config fp16;
  Bf16Config bf16;
  ZeroConfig zero;
  nvme::IoConfig aio;  // the "aio" block, field for field (plus tierzero's aio.backend,
                       // aio.use_direct, aio.register_buffers), checked by nvme::validate()
  OptimizerConfig optimizer;
  std::optional<LrScheduleConfig> scheduler;  // absent: constant optimizer lr (DeepSpeed's behaviour)
  bool optimizer_from_flags = false;          // no optimizer section: the HF Trainer's AdamW with --lr
                                              // (and kLinear without a scheduler section)
  double gradient_clipping = 1.0;             // max global grad norm; 0 = no clipping (DeepSpeed
                                              // 0.19's default is 1.0; older releases used 0)
  ActivationCheckpointingConfig activation_checkpointing;
  int64_t steps_per_print = 10;  // DeepSpeed's default is None (no periodic line); tierzero logs
                                 // a summary line every 10 steps when the key is absent
  bool wall_clock_breakdown = false;
  TierzeroConfig tierzero;

  std::vector<std::string> warnings;  // one line per unknown key / ignored setting

  // kFp16, kBf16 or kFp32 from the enabled flags.
  Precision precision() const;
  // The loss scaler this config asks for: fp16's, or LossScalerConfig::unit() otherwise.
  LossScalerConfig loss_scaler_config() const;
  // Whether the engine's parameter shard lives on NVMe: offload_param "nvme", except in a
  // tierzero.lora run, whose adapters stay in host memory and whose frozen base goes there instead.
  bool param_shard_on_nvme() const;
};

// ---- The key registry ----------------------------------------------------------------------
// Every key the parser reads, with what tierzero does with it (configs/README.md shows the table):
//   honoured: it takes effect (or selects among values the trainer refuses by name, e.g. "nvme");
//   warned:   it has no effect in tierzero; parse_ds_config() adds a warning naming the key and why
//             when it is set to anything but `accepted` (the value tierzero behaves as anyway);
//   refused:  any value but `accepted` is an error naming the key and why (the parser, or the
//             trainer for what depends on the engine).
enum class KeyHandling : uint8_t { kHonoured, kWarned, kRefused };
struct ConfigKey {
  std::string_view path;  // JSON path, "zero_optimization.offload_optimizer.ratio"
  KeyHandling handling;
  std::string_view accepted;  // JSON text (kWarned / kRefused); "" for kHonoured
  std::string_view note;      // why, or what tierzero does
};
// The registry, in the order configs/README.md lists it.
std::span<const ConfigKey> ds_config_keys();
// "honoured", "warned" or "refused".
const char* key_handling_name(KeyHandling handling);

// Parses and checks a ds_config, resolving "auto" and the batch triad with `hints`.
// kInvalidArgument names the key (JSON path) and what to do; warnings go to DsConfig::warnings.
Result<DsConfig> parse_ds_config(const nlohmann::json& json, const ResolveHints& hints);
// Same, from JSON text; a syntax error reports its line and column, a key given twice in one object
// its path and both lines.
Result<DsConfig> parse_ds_config_text(std::string_view text, const ResolveHints& hints);
// Same, from a file; every error starts with the path.
Result<DsConfig> load_ds_config(const std::string& path, const ResolveHints& hints);

// The resolved config as ds_config JSON: every key the parser knows, defaults filled in, "auto"
// replaced by its value. Feeding it back to parse_ds_config() (with the same hints) gives the same
// DsConfig, and DeepSpeed (0.19.8) loads it too: it ignores the `tierzero` section and the extra aio
// keys. With optimizer_from_flags the optimizer section is left out, and so is the scheduler when
// it is the HF Trainer's linear one, as in the input: they are not DeepSpeed's (optimizer_summary()
// names them).
nlohmann::json to_json(const DsConfig& config);
// to_json() pretty-printed (2-space indent), for the start-up log.
std::string resolved_config_text(const DsConfig& config);
// One line naming the optimizer, its hyper-parameters and the lr schedule, and where they come from
// (the ds_config's sections, or the HF Trainer's defaults with --lr), for the run header:
// "optimizer AdamW lr 0.0003, betas (0.9, 0.999), eps 1e-08, weight decay 0 (...); lr schedule ...".
std::string optimizer_summary(const DsConfig& config);

// ---- The engine's settings ----------------------------------------------------------------------
// What the ZeRO engine is asked to keep and where, torch-free: a ds_config's (engine_settings()), or
// the options of an engine built without one (ZeroEngineOptions, engine/zero/zero_engine.h).
// check_engine_settings() holds the engine's refusals: the trainer runs it on the ds_config's
// settings as it makes the engine's options (engine/train's engine_options()), so a config the
// engine cannot honour is refused before an engine is built, and ZeroEngine runs it on the options
// it is given. (parse_ds_config() refuses what contradicts the config itself; what only this
// engine cannot do, a DeepSpeed config may still ask for, e.g. for `convert`.)
struct EngineSettings {
  int stage = 0;                                 // zero_optimization.stage
  ElementType compute = ElementType::kF32;       // the compute weights (bf16.enabled / fp16.enabled)
  bool offload_optimizer = false;                // offload_optimizer.device "cpu" or "nvme"
  bool state_on_nvme = false;                    // offload_optimizer.device "nvme"
  bool offload_params = false;                   // offload_param.device "cpu" or "nvme"
  bool params_on_nvme = false;                   // the parameter shard on NVMe (DsConfig::param_shard_on_nvme)
  int grad_staging_buffers = 4;                  // offload_optimizer.buffer_count
  int64_t sub_group_size = 1'000'000'000;        // zero_optimization.sub_group_size
  ElementType state = ElementType::kF32;         // tierzero.optimizer_state_dtype (kI8: 8-bit blockwise)
  bool compact_master = false;                   // tierzero.master_weights "compact"
  ElementType offload_grad = ElementType::kF32;  // tierzero.offload_grad_dtype
  bool params16_round_away = false;              // ZeroEngineOptions::params16_rounding kNearestAway (no key)
  int64_t records_in_memory = 0;                 // tierzero.optimizer_records_in_memory (kOptimizerRecordsAuto)
  double gpu_optimizer_share = 0.0;              // tierzero.gpu_optimizer_share ([0, 1))
  uint64_t pinned_memory_limit = 0;              // tierzero.pinned_memory_limit
  // The gradient ring and what it needs: the optimizer stepping inside the window's backward.
  int64_t grad_ring_records = 0;            // tierzero.grad_ring_records (0: the whole gradient partition)
  int world_size = 1;                       // data-parallel ranks (the batch triad's, or the engine's Comm)
  bool overlap_comm = false;                // zero_optimization.overlap_comm (ZeroEngineOptions::overlap_offload)
  double gradient_clipping = 0.0;           // gradient_clipping (0: none)
  int64_t gradient_accumulation_steps = 1;  // gradient_accumulation_steps
};
// The settings `config` asks of the engine (those engine/train's engine_options() hands it).
EngineSettings engine_settings(const DsConfig& config);
// Refuses settings the engine cannot honour: kInvalidArgument naming the key and the fix.
// `partition_numel`: this rank's partition elements, 0 while not known (a ds_config alone; the int8
// moments' sub-group check then waits for the engine, which knows it). The gradient ring is refused
// here wherever the optimizer could not step inside the window's backward (the conditions of
// engine/layout's step_in_backward_refusal, plus an offloaded optimizer, overlap_comm and a window
// of >= 2 micro-batches), all decided by the config alone; its slot count waits for the engine,
// which knows the records a unit spans (the model's parameters).
Status check_engine_settings(const EngineSettings& settings, int64_t partition_numel = 0);

}  // namespace tierzero::engine
