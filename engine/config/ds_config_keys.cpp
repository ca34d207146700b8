// The key registry: every ds_config key the parser reads, and what tierzero does with it. The
// table in configs/README.md is this list (tests/engine/config/key_registry_test.cpp checks both
// against each other and against to_json()).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine {
namespace {

constexpr KeyHandling H = KeyHandling::kHonoured;
constexpr KeyHandling W = KeyHandling::kWarned;
constexpr KeyHandling R = KeyHandling::kRefused;

constexpr const char* kAioNote = "the swap I/O of offload_optimizer.device \"nvme\" (and bench io)";
constexpr const char* kNotImplemented = "a DeepSpeed feature tierzero does not implement";
constexpr const char* kMonitor = "DeepSpeed's monitor; tierzero writes --metrics (report/METRICS.md)";
constexpr const char* kAttribute =
    "not a key DeepSpeed reads: the name of an attribute of its config object, which DeepSpeed prints as its "
    "configuration and ignores as a key";
constexpr const char* kRecompute =
    "tierzero recomputes each layer in backward (activation checkpointing per layer is built in; "
    "tierzero.kept_activations keeps the last layers' graphs instead)";

constexpr ConfigKey kKeys[] = {
    {"train_batch_size", H, "", "DeepSpeed's derivation and checks"},
    {"train_micro_batch_size_per_gpu", H, "", ""},
    {"gradient_accumulation_steps", H, "", ""},
    {"gradient_clipping", H, "", "global L2 norm, as DeepSpeed clips"},
    {"steps_per_print", H, "", "the step line every N steps, plus the first and the last"},
    {"wall_clock_breakdown", H, "", "the step line and metrics carry the engine's time breakdown"},
    {"fp16.enabled", H, "", ""},
    {"fp16.auto_cast", W, "false", "the model's inputs are token ids; there is nothing to cast"},
    {"fp16.loss_scale", H, "", "0 = dynamic"},
    {"fp16.initial_scale_power", H, "", ""},
    {"fp16.loss_scale_window", H, "", ""},
    {"fp16.hysteresis", H, "", ""},
    {"fp16.consecutive_hysteresis", H, "", ""},
    {"fp16.min_loss_scale", H, "", ""},
    {"fp16.fp16_master_weights_and_grads", W, "false", kNotImplemented},
    {"bf16.enabled", H, "", ""},
    {"bf16.immediate_grad_update", W, "false", kNotImplemented},
    {"bf16.check_grad_overflow", W, "true", "bf16 steps are never skipped (no loss scale)"},
    {"bf16.bf16_master_weights_and_grads", W, "false",
     "DeepSpeed's bf16 master; tierzero.master_weights \"compact\" keeps an exact master in 2 B/param"},
    {"bf16.bf16_optimizer_states", W, "false", "tierzero.optimizer_state_dtype \"bf16\" sets bf16 moments"},
    {"bfloat16.enabled", H, "", "DeepSpeed's older name for bf16"},
    {"bfloat16.immediate_grad_update", W, "false", kNotImplemented},
    {"bfloat16.check_grad_overflow", W, "true", "bf16 steps are never skipped (no loss scale)"},
    {"bfloat16.bf16_master_weights_and_grads", W, "false",
     "DeepSpeed's bf16 master; tierzero.master_weights \"compact\" keeps an exact master in 2 B/param"},
    {"bfloat16.bf16_optimizer_states", W, "false", "tierzero.optimizer_state_dtype \"bf16\" sets bf16 moments"},
    {"zero_optimization.stage", H, "", "0-3; a boolean zero_optimization is stage 1 (deprecated)"},
    {"zero_optimization.contiguous_gradients", W, "true", "gradients always live in flat contiguous partitions"},
    {"zero_optimization.reduce_scatter", W, "true", "stages 2 and 3 always reduce-scatter"},
    {"zero_optimization.allgather_partitions", W, "true", "updated partitions are always all-gathered"},
    {"zero_optimization.overlap_comm", H, "",
     "offloaded optimizer: gradient copies and the CPU step overlap backward (false: the plain step); "
     "gradient reduction always overlaps backward"},
    {"zero_optimization.round_robin_gradients", W, "false", "gradients are partitioned in order"},
    {"zero_optimization.reduce_bucket_size", H, "", "elements per gradient reduction bucket"},
    {"zero_optimization.allgather_bucket_size", W, "500000000",
     "stages 1-2 gather the updated partition in one collective"},
    {"zero_optimization.sub_group_size", H, "", "elements per CPU optimizer sub-group"},
    {"zero_optimization.stage3_prefetch_bucket_size", H, "", ""},
    {"zero_optimization.prefetch_bucket_size", H, "", "alias of stage3_prefetch_bucket_size"},
    {"zero_optimization.stage3_param_persistence_threshold", H, "", ""},
    {"zero_optimization.param_persistence_threshold", H, "", "alias"},
    {"zero_optimization.stage3_max_live_parameters", H, "", ""},
    {"zero_optimization.max_live_parameters", H, "", "alias"},
    {"zero_optimization.stage3_max_reuse_distance", H, "", ""},
    {"zero_optimization.max_reuse_distance", H, "", "alias"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", H, "",
     "--save also writes the 16-bit model beside the checkpoint"},
    {"zero_optimization.gather_16bit_weights_on_model_save", H, "", "alias"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", H, "", "older alias"},
    {"zero_optimization.stage3_allgather_sequential", W, "false", kNotImplemented},
    {"zero_optimization.allgather_sequential", W, "false", kNotImplemented},
    {"zero_optimization.compute_grad_norm", W, "true", kNotImplemented},
    {"zero_optimization.elastic_checkpoint", W, "false", kNotImplemented},
    {"zero_optimization.enable_sanity_checks", W, "false", kNotImplemented},
    {"zero_optimization.ignore_unused_parameters", W, "true", kNotImplemented},
    {"zero_optimization.legacy_stage1", W, "false", kNotImplemented},
    {"zero_optimization.load_from_fp32_weights", W, "true", kNotImplemented},
    {"zero_optimization.log_trace_cache_warnings", W, "false", kNotImplemented},
    {"zero_optimization.memory_efficient_linear", W, "true", kNotImplemented},
    {"zero_optimization.stage3_module_granularity_threshold", W, "0", kNotImplemented},
    {"zero_optimization.module_granularity_threshold", W, "0", kNotImplemented},
    {"zero_optimization.override_module_apply", W, "true", kNotImplemented},
    {"zero_optimization.parameter_alignment", W, "false", kNotImplemented},
    {"zero_optimization.pipeline_loading_checkpoint", W, "false", kNotImplemented},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", W, "false", kNotImplemented},
    {"zero_optimization.use_all_reduce_for_fetch_params", W, "false", kNotImplemented},
    {"zero_optimization.use_multi_rank_bucket_allreduce", W, "true", kNotImplemented},
    {"zero_optimization.zero_hpz_partition_size", W, "1", kNotImplemented},
    {"zero_optimization.zero_quantized_weights", W, "false", kNotImplemented},
    {"zero_optimization.zero_quantized_nontrainable_weights", W, "false", kNotImplemented},
    {"zero_optimization.zero_quantized_gradients", W, "false", kNotImplemented},
    {"zero_optimization.save_muon_momentum_buffer_in_memory", W, "false", kNotImplemented},
    {"zero_optimization.zenflow", W, "null", kNotImplemented},
    {"zero_optimization.leaf_module", W, "null", kNotImplemented},
    {"zero_optimization.stage3_model_persistence_threshold", W, "null", kNotImplemented},
    {"zero_optimization.model_persistence_threshold", W, "null", kNotImplemented},
    {"zero_optimization.cpu_offload", H, "", "deprecated: offload_optimizer.device \"cpu\""},
    {"zero_optimization.cpu_offload_param", H, "", "deprecated: offload_param.device \"cpu\""},
    {"zero_optimization.cpu_offload_use_pin_memory", H, "", "deprecated: pin_memory"},
    {"zero_optimization.offload_param.device", H, "",
     "\"none\", \"cpu\" or \"nvme\" (stage 3; \"nvme\" with an offloaded optimizer: the 16-bit shard in swap "
     "files, one record per optimizer sub-group, read ahead of use along the recorded trace)"},
    {"zero_optimization.offload_param.nvme_path", H, "",
     "with device \"nvme\": the directory of this rank's parameter swap file; a list of directories (a "
     "tierzero extension; DeepSpeed takes one string) stripes every record over one file in each"},
    {"zero_optimization.offload_param.buffer_count", H, "",
     "with device \"nvme\": pinned read buffers; a unit's shard must fit in them (a clear error says how many)"},
    {"zero_optimization.offload_param.buffer_size", H, "", "with device \"nvme\": elements one read buffer holds"},
    {"zero_optimization.offload_param.max_in_cpu", H, "",
     "with device \"nvme\": the shard's first max_in_cpu elements (whole sub-groups) stay in pinned host memory"},
    {"zero_optimization.offload_param.pin_memory", H, "", "the host copy of the parameter shards is pinned"},
    {"zero_optimization.offload_optimizer.device", H, "",
     "\"none\", \"cpu\" or \"nvme\" (master, m, v in swap files, stepped sub-group by sub-group)"},
    {"zero_optimization.offload_optimizer.nvme_path", H, "",
     "with device \"nvme\": the directory of this rank's swap file, which must exist; a list of directories "
     "(a tierzero extension; DeepSpeed takes one string) stripes every sub-group's state over one file in each"},
    {"zero_optimization.offload_optimizer.buffer_count", H, "",
     "pinned staging slots of gradients bound for the CPU optimizer; with device \"nvme\" also the pinned "
     "buffers of one sub-group's state each"},
    {"zero_optimization.offload_optimizer.pin_memory", W, "true",
     "the offloaded optimizer state is always pinned where a GPU exists (its copies are asynchronous)"},
    {"zero_optimization.offload_optimizer.pipeline_read", H, "",
     "with device \"nvme\": the next sub-groups' state is read while one steps"},
    {"zero_optimization.offload_optimizer.pipeline_write", H, "",
     "with device \"nvme\": a stepped sub-group's state is written while the next steps"},
    {"zero_optimization.offload_optimizer.ratio", R, "1",
     "partial optimizer offload is not implemented: offload all of it (1) or none"},
    {"zero_optimization.offload_optimizer.fast_init", W, "false", kNotImplemented},
    {"zero_optimization.offload_optimizer.cpuadam_cores_perc", W, "0.8",
     "tierzero.cpu_threads sets the CPU Adam's threads"},
    {"zero_optimization.offload_optimizer.super_offload", W, "false", kNotImplemented},
    {"aio.backend", H, "", kAioNote},
    {"aio.block_size", H, "", kAioNote},
    {"aio.queue_depth", H, "", kAioNote},
    {"aio.intra_op_parallelism", H, "", kAioNote},
    {"aio.thread_count", H, "", kAioNote},
    {"aio.single_submit", H, "", kAioNote},
    {"aio.overlap_events", H, "", kAioNote},
    {"aio.use_direct", H, "", kAioNote},
    {"aio.register_buffers", H, "", kAioNote},
    {"aio.use_gds", W, "false", "no GPUDirect Storage"},
    {"optimizer.type", H, "", "Adam or AdamW"},
    {"optimizer.params.lr", H, "", ""},
    {"optimizer.params.betas", H, "", ""},
    {"optimizer.params.eps", H, "", ""},
    {"optimizer.params.weight_decay", H, "", ""},
    {"optimizer.params.bias_correction", H, "", ""},
    {"optimizer.params.adam_w_mode", H, "", "DeepSpeed's Adam: decoupled weight decay when true"},
    {"optimizer.params.torch_adam", W, "false", "tierzero's own Adam kernels run either way"},
    {"optimizer.params.amsgrad", R, "false", "no AMSGrad kernel"},
    {"optimizer.params.max_grad_norm", R, "null", "DeepSpeed refuses it too: use gradient_clipping"},
    {"optimizer.legacy_fusion", W, "false", "tierzero's own Adam kernels run either way"},
    {"scheduler.type", H, "", "WarmupLR, WarmupDecayLR or WarmupCosineLR"},
    {"scheduler.params.warmup_num_steps", H, "", ""},
    {"scheduler.params.warmup_type", H, "", ""},
    {"scheduler.params.warmup_min_lr", H, "", "WarmupLR, WarmupDecayLR"},
    {"scheduler.params.warmup_max_lr", H, "", "WarmupLR, WarmupDecayLR"},
    {"scheduler.params.total_num_steps", H, "", "WarmupDecayLR, WarmupCosineLR"},
    {"scheduler.params.warmup_min_ratio", H, "", "WarmupCosineLR"},
    {"scheduler.params.cos_min_ratio", H, "", "WarmupCosineLR"},
    {"activation_checkpointing.partition_activations", W, "false", kRecompute},
    {"activation_checkpointing.cpu_checkpointing", W, "false", kRecompute},
    {"activation_checkpointing.contiguous_memory_optimization", W, "false", kRecompute},
    {"activation_checkpointing.number_checkpoints", W, "null", kRecompute},
    {"activation_checkpointing.synchronize_checkpoint_boundary", W, "false", kRecompute},
    {"activation_checkpointing.profile", W, "false", kRecompute},
    {"prescale_gradients", W, "false", "gradients are averaged after reduction, as DeepSpeed does by default"},
    {"gradient_predivide_factor", W, "1", kNotImplemented},
    {"sparse_gradients", W, "false", kNotImplemented},
    {"zero_allow_untested_optimizer", W, "false", "tierzero runs its own Adam / AdamW only"},
    {"zero_force_ds_cpu_optimizer", W, "true", "the offloaded optimizer is always tierzero's CPU Adam"},
    {"communication_data_type", W, "null",
     "gradients are reduced in the training dtype (fp32 with grad_accum_dtype fp32)"},
    {"seq_parallel_communication_data_type", W, "null", kNotImplemented},
    {"memory_breakdown", W, "false", "the step line always carries memory per tier"},
    {"dump_state", W, "false", kNotImplemented},
    {"disable_allgather", W, "false", kNotImplemented},
    {"dataloader_drop_last", W, "false", "tierzero reads its own data (tierzero.data)"},
    {"load_universal_checkpoint", W, "false", kNotImplemented},
    {"graph_harvesting", W, "false", kNotImplemented},
    {"amp", W, "null", "bf16 / fp16 are the 16-bit modes"},
    {"tensorboard", W, "null", kMonitor},
    {"wandb", W, "null", kMonitor},
    {"csv_monitor", W, "null", kMonitor},
    {"comet", W, "null", kMonitor},
    {"comms_logger", W, "null", kNotImplemented},
    {"flops_profiler", W, "null", "the step line prints TFLOPS"},
    {"autotuning", W, "null", "tierzero estimate plans a run instead"},
    {"elasticity", W, "null", kNotImplemented},
    {"checkpoint", W, "null", "tierzero.checkpoint holds tierzero's checkpoint settings"},
    {"data_types", W, "null", "tierzero.grad_accum_dtype sets the gradient accumulation dtype"},
    {"compile", W, "null", kNotImplemented},
    {"data_efficiency", W, "null", kNotImplemented},
    {"curriculum_learning", W, "null", kNotImplemented},
    {"compression_training", W, "null", kNotImplemented},
    {"sparse_attention", W, "null", kNotImplemented},
    {"pipeline", W, "null", kNotImplemented},
    {"progressive_layer_drop", W, "null", kNotImplemented},
    {"eigenvalue", W, "null", kNotImplemented},
    {"timers", W, "null", kNotImplemented},
    {"nebula", W, "null", kNotImplemented},
    {"hybrid_engine", W, "null", kNotImplemented},
    {"weight_quantization", W, "null", kNotImplemented},
    {"datastates_ckpt", W, "false", "tierzero writes its own checkpoints (tierzero.checkpoint)"},
    {"disable_python_gc", W, "false", "tierzero runs no Python"},
    {"expert_parallel", W, "null", kNotImplemented},
    {"gradient_allreduce_op", W, "\"mean\"", "gradients are averaged over the ranks (DeepSpeed's \"mean\")"},
    {"log_level", W, "null", "tierzero prints its own log (the run header and step lines)"},
    {"managed_gradient_accumulation", W, "true", "tierzero always accumulates over gradient_accumulation_steps"},
    {"tensor_parallel", W, "null", kNotImplemented},
    {"torch_autocast", W, "null", "bf16 / fp16 are the 16-bit modes"},
    {"use_data_before_expert_parallelism", W, "false", kNotImplemented},
    {"vocabulary_size", W, "null", "DeepSpeed only warns about its alignment; tierzero reads the model's config.json"},
    {"activation_checkpointing_config", W, "null", kAttribute},
    {"aio_config", W, "null", kAttribute},
    {"autotuning_config", W, "null", kAttribute},
    {"bfloat16_config", W, "null", kAttribute},
    {"buffer_dtype", W, "null", kAttribute},
    {"checkpoint_config", W, "null", kAttribute},
    {"checkpoint_parallel_write_pipeline", W, "null", kAttribute},
    {"checkpoint_tag_validation_enabled", W, "null", kAttribute},
    {"checkpoint_tag_validation_fail", W, "null", kAttribute},
    {"comms_config", W, "null", kAttribute},
    {"compile_config", W, "null", kAttribute},
    {"data_efficiency_config", W, "null", kAttribute},
    {"data_efficiency_enabled", W, "null", kAttribute},
    {"datastates_config", W, "null", kAttribute},
    {"expert_parallel_config", W, "null", kAttribute},
    {"float16_config", W, "null", kAttribute},
    {"flops_profiler_config", W, "null", kAttribute},
    {"global_rank", W, "null", kAttribute},
    {"grad_accum_dtype", W, "null", kAttribute},
    {"keep_in_fp32_modules", W, "null", kAttribute},
    {"monitor_config", W, "null", kAttribute},
    {"optimizer_legacy_fusion", W, "null", kAttribute},
    {"optimizer_name", W, "null", kAttribute},
    {"optimizer_params", W, "null", kAttribute},
    {"param_dtype", W, "null", kAttribute},
    {"scheduler_name", W, "null", kAttribute},
    {"scheduler_params", W, "null", kAttribute},
    {"tensor_parallel_config", W, "null", kAttribute},
    {"timers_config", W, "null", kAttribute},
    {"torch_autocast_dtype", W, "null", kAttribute},
    {"torch_autocast_enabled", W, "null", kAttribute},
    {"torch_autocast_lower_precision_safe_modules", W, "null", kAttribute},
    {"use_data_before_expert_parallel_", W, "null", kAttribute},
    {"use_node_local_storage", W, "null", kAttribute},
    {"weight_quantization_config", W, "null", kAttribute},
    {"world_size", W, "null", kAttribute},
    {"zero_config", W, "null", kAttribute},
    {"zero_enabled", W, "null", kAttribute},
    {"zero_optimization_stage", W, "null", kAttribute},
    {"tierzero.gpu_memory_limit", H, "", "GPU budget the engine enforces; 0 = the whole device"},
    {"tierzero.pinned_memory_limit", H, "", "pinned host budget the engine enforces; 0 = none"},
    {"tierzero.cpu_threads", H, "", "CPU optimizer threads; 0 = all cores"},
    {"tierzero.grad_accum_dtype", H, "", ""},
    {"tierzero.optimizer_state_dtype", H, "",
     "the offloaded optimizer's m and v: \"fp32\" 8 B/param; \"bf16\" 4 (rounded to nearest even); \"int8\" 2 "
     "(8-bit blockwise: int8 m, uint8 v, an fp32 scale per 256 elements; not exact, its quality measured); needs "
     "offload_optimizer \"cpu\" or \"nvme\""},
    {"tierzero.master_weights", H, "",
     "the offloaded optimizer's fp32 master: \"fp32\" 4 B/param; \"compact\" exact in 2 (the bf16 compute "
     "weights, rounded to nearest with ties away from zero, plus a 16-bit residual); needs bf16 and "
     "offload_optimizer \"cpu\" or \"nvme\""},
    {"tierzero.offload_grad_dtype", H, "",
     "the offloaded optimizer's host gradient partition: \"fp32\" 4 B/param; \"bf16\" 2 (summed in fp32 on the "
     "GPU over the micro-batches, rounded once as it crosses PCIe once a step); needs offload_optimizer"},
    {"tierzero.grad_ring_records", H, "",
     "the offloaded optimizer's host gradients land in N record-sized slots (sub_group_size each), each freed once "
     "the optimizer has read its record inside the window's backward, instead of the whole partition; needs that "
     "step (no gradient clipping, one rank, stage 3) and N >= the records a unit spans (the engine names it); 0: "
     "the partition"},
    {"tierzero.optimizer_records_in_memory", H, "",
     "offload_optimizer \"nvme\" only: the first N sub-group records stay in pinned memory (no NVMe traffic, no "
     "swap file); \"auto\": as many as tierzero.pinned_memory_limit holds; 0: all on NVMe (DeepSpeed)"},
    {"tierzero.gpu_optimizer_share", H, "",
     "a number in [0, 1): that share of the offloaded optimizer's elements (whole sub-groups, spread over the "
     "partition) is stepped on the GPU after the backward, while the CPU steps the rest: the gradient and compact "
     "state go up, step there and come back, bit for bit the CPU kernel's bytes; needs a CUDA device, "
     "tierzero.master_weights \"compact\" and a CPU whose SIMD target fuses multiply-adds; 0: the CPU steps all"},
    {"tierzero.window_group", H, "",
     "micro-batches the window (each unit fetched once a step for all the micro-batches) runs as one batch "
     "through each decoder layer: larger matrix products, the group's weight gradients summed inside them; an "
     "integer dividing gradient_accumulation_steps, or \"auto\" (default): on a GPU the largest that fits its "
     "budget, 1 without one; 1 gives the bits of the micro-batch-by-micro-batch path"},
    {"tierzero.kept_activations", H, "",
     "decoder layers, the last ones, whose forward graphs (their activations) the window keeps on the GPU for "
     "the backward instead of recomputing the layer there: less compute, more GPU memory; an integer >= 0 "
     "(default 0: every layer recomputed), or \"auto\": on a GPU as many as fit its budget beside the rest of "
     "the plan, 0 without one"},
    {"tierzero.offload_grad_accumulator", H, "",
     "where an offloaded optimizer's step sums the micro-batches of a window: \"device\" in an fp32 accumulator on "
     "the GPU (4 B/param of this rank's partition), landing once per step; \"host\" lands every micro-batch (a D2H "
     "copy and a CPU pass each); \"auto\" picks device with gradient_accumulation_steps > 1 when it fits the GPU "
     "budget; the same results either way"},
    {"tierzero.checkpoint.compression", H, "", "\"zstd\": checkpoint sections are zstd frames"},
    {"tierzero.checkpoint.level", H, "", "zstd level"},
    {"tierzero.checkpoint.save_every", H, "", "save every N steps (needs --save); 0 = at the end only"},
    {"tierzero.checkpoint.keep_last", H, "", "checkpoints kept by periodic saves; 0 = all"},
    {"tierzero.checkpoint.write_behind", H, "",
     "host memory a periodic save copies the state into ahead of the disk (the optimizer waits for the copy, not "
     "the write); \"auto\": the rank's checkpoint bytes, at most half of MemAvailable once the engine is built; 0: "
     "the state read at the disk's rate"},
    {"tierzero.data.path", H, "", ""},
    {"tierzero.data.seq_len", H, "", ""},
    {"tierzero.data.seed", H, "", ""},
    {"tierzero.data.dtype", H, "", ""},
    {"tierzero.lora.r", H, "",
     "LoRA rank (PEFT LoraConfig.r); the block's presence trains adapters over a frozen base"},
    {"tierzero.lora.lora_alpha", H, "", "scaling = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora)"},
    {"tierzero.lora.lora_dropout", H, "", "in [0, 1); the recomputation in backward replays the forward's masks"},
    {"tierzero.lora.target_modules", H, "",
     "module names matched as PEFT does (the path or its last components), \"all-linear\" (every linear but the "
     "LM head) or one regular expression the whole path must match"},
    {"tierzero.lora.bias", H, "", "only \"none\" (PEFT's default) is accepted"},
    {"tierzero.lora.use_rslora", H, "", "rank-stabilised scaling lora_alpha / sqrt(r)"},
    {"tierzero.lora.init_adapter", H, "", "a PEFT adapter directory to start from instead of PEFT's initialisation"},
    {"tierzero.ignore_unknown_keys", H, "",
     "key paths of other tools (e.g. [\"my_tool\", \"zero_optimization.my_key\"]) passed over with a warning "
     "instead of refused as unknown; a path tierzero knows is an error"},
};

// Numbers compare by value whether written 5e8, 500000000 or "5e8".
bool same_value(const nlohmann::json& given, const nlohmann::json& accepted) {
  if (accepted.is_number() && (given.is_number() || given.is_string())) {
    if (given.is_number()) return given.get<double>() == accepted.get<double>();
    const std::string text = given.get<std::string>();
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    return !text.empty() && end == text.c_str() + text.size() && value == accepted.get<double>();
  }
  return given == accepted;
}

}  // namespace

std::span<const ConfigKey> ds_config_keys() { return kKeys; }

const char* key_handling_name(KeyHandling handling) {
  switch (handling) {
    case KeyHandling::kHonoured: return "honoured";
    case KeyHandling::kWarned: return "warned";
    case KeyHandling::kRefused: return "refused";
  }
  return "?";
}

namespace detail {

const nlohmann::json* find_path(const nlohmann::json& root, std::string_view path) {
  const nlohmann::json* node = &root;
  while (!path.empty()) {
    const size_t dot = path.find('.');
    const std::string step(path.substr(0, dot));
    if (!node->is_object()) return nullptr;
    auto it = node->find(step);
    if (it == node->end()) return nullptr;
    node = &*it;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  return node;
}

void warn_ineffective_keys(const nlohmann::json& root, Warnings* warnings) {
  // The settings with each reason, in the registry's order of the reasons' first use.
  std::vector<std::pair<std::string_view, std::vector<std::string>>> by_note;
  size_t count = 0;
  std::string only;  // the one-key form
  for (const ConfigKey& key : kKeys) {
    if (key.handling != KeyHandling::kWarned) continue;
    const nlohmann::json* given = find_path(root, key.path);
    if (given == nullptr || given->is_null()) continue;
    if (same_value(*given, nlohmann::json::parse(key.accepted))) continue;
    const std::string setting = std::string(key.path) + "=" + given->dump();
    only = setting + " has no effect in tierzero (ignored): " + std::string(key.note);
    auto same_note = [&](const auto& entry) { return entry.first == key.note; };
    auto it = std::find_if(by_note.begin(), by_note.end(), same_note);
    if (it == by_note.end()) it = by_note.insert(by_note.end(), {key.note, {}});
    it->second.push_back(setting);
    ++count;
  }
  if (count == 1) warnings->push_back(only);
  if (count <= 1) return;
  std::vector<std::string> groups;  // "KEY=VALUE, KEY=VALUE (why)"
  for (const auto& [note, settings] : by_note) groups.push_back(fmt::format("{} ({})", fmt::join(settings, ", "), note));
  warnings->push_back(
      fmt::format("{} ds_config keys have no effect in tierzero (ignored): {}", count, fmt::join(groups, "; ")));
}

bool is_warned_key(std::string_view path) {
  for (const ConfigKey& key : kKeys)
    if (key.path == path) return key.handling == KeyHandling::kWarned;
  return false;
}

std::vector<std::string> registered_children(std::string_view parent) {
  std::vector<std::string> names;
  for (const ConfigKey& key : kKeys) {
    std::string_view rest = key.path;
    if (!parent.empty()) {
      if (!rest.starts_with(parent) || rest.size() <= parent.size() || rest[parent.size()] != '.') continue;
      rest.remove_prefix(parent.size() + 1);
    }
    names.emplace_back(rest.substr(0, rest.find('.')));
  }
  return names;
}

}  // namespace detail
}  // namespace tierzero::engine
