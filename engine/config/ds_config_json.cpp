// to_json(): the resolved config, written with the keys parse_ds_config() reads.
#include <string>

#include "engine/config/ds_config.h"
#include "engine/config/internal/ds_config_sections.h"

namespace tierzero::engine {
namespace {

using nlohmann::json;

json string_or_null(const std::string& s) { return s.empty() ? json(nullptr) : json(s); }

// nvme_path as DeepSpeed writes it (one directory, or null) unless several stripe (a list).
json nvme_path_json(const std::vector<std::string>& paths) {
  if (paths.size() > 1) return json(paths);
  return paths.empty() ? json(nullptr) : json(paths.front());
}

json zero_json(const ZeroConfig& z) {
  const OffloadParamConfig& p = z.offload_param;
  const OffloadOptimizerConfig& o = z.offload_optimizer;
  return {
      {"stage", z.stage},
      {"contiguous_gradients", z.contiguous_gradients},
      {"reduce_scatter", z.reduce_scatter},
      {"allgather_partitions", z.allgather_partitions},
      {"overlap_comm", z.overlap_comm},
      {"round_robin_gradients", z.round_robin_gradients},
      {"reduce_bucket_size", z.reduce_bucket_size},
      {"allgather_bucket_size", z.allgather_bucket_size},
      {"sub_group_size", z.sub_group_size},
      {"stage3_prefetch_bucket_size", z.prefetch_bucket_size},
      {"stage3_param_persistence_threshold", z.param_persistence_threshold},
      {"stage3_max_live_parameters", z.max_live_parameters},
      {"stage3_max_reuse_distance", z.max_reuse_distance},
      {"stage3_gather_16bit_weights_on_model_save", z.gather_16bit_weights_on_model_save},
      {"offload_param",
       {{"device", offload_device_name(p.device)},
        {"nvme_path", nvme_path_json(p.nvme_paths)},
        {"buffer_count", p.buffer_count},
        {"buffer_size", p.buffer_size},
        {"max_in_cpu", p.max_in_cpu},
        {"pin_memory", p.pin_memory}}},
      {"offload_optimizer",
       {{"device", offload_device_name(o.device)},
        {"nvme_path", nvme_path_json(o.nvme_paths)},
        {"buffer_count", o.buffer_count},
        {"pin_memory", o.pin_memory},
        {"pipeline_read", o.pipeline_read},
        {"pipeline_write", o.pipeline_write},
        {"ratio", o.ratio}}},
  };
}

json scheduler_json(const LrScheduleConfig& s) {
  json params = {{"warmup_num_steps", s.warmup_num_steps}, {"warmup_type", warmup_type_name(s.warmup_type)}};
  if (s.type == LrScheduleType::kWarmupCosineLR) {
    params["warmup_min_ratio"] = s.warmup_min_ratio;
    params["cos_min_ratio"] = s.cos_min_ratio;
  } else {
    params["warmup_min_lr"] = s.warmup_min_lr;
    params["warmup_max_lr"] = s.warmup_max_lr;
  }
  if (s.type != LrScheduleType::kWarmupLR) params["total_num_steps"] = s.total_num_steps;
  return {{"type", lr_schedule_type_name(s.type)}, {"params", params}};
}

json tierzero_json(const TierzeroConfig& t) {
  json out = {
      {"gpu_memory_limit", t.gpu_memory_limit},
      {"pinned_memory_limit", t.pinned_memory_limit},
      {"cpu_threads", t.cpu_threads},
      {"grad_accum_dtype", t.grad_accum_dtype == GradAccumDtype::kFp32 ? "fp32" : "bf16"},
      {"optimizer_state_dtype", optimizer_state_dtype_name(t.optimizer_state_dtype)},
      {"master_weights", master_weights_name(t.master_weights)},
      {"offload_grad_dtype", t.offload_grad_dtype == OffloadGradDtype::kFp32 ? "fp32" : "bf16"},
      {"grad_ring_records", t.grad_ring_records},
      {"optimizer_records_in_memory",
       t.optimizer_records_in_memory == kOptimizerRecordsAuto ? json("auto") : json(t.optimizer_records_in_memory)},
      {"gpu_optimizer_share", t.gpu_optimizer_share},
      {"window_group", t.window_group == kWindowGroupAuto ? json("auto") : json(t.window_group)},
      {"kept_activations", t.kept_activations == kKeptActivationsAuto ? json("auto") : json(t.kept_activations)},
      {"offload_grad_accumulator", offload_grad_accumulator_name(t.offload_grad_accumulator)},
      {"checkpoint",
       {{"compression", t.checkpoint_compression == CheckpointCompression::kNone ? "none" : "zstd"},
        {"level", t.checkpoint_compression_level},
        {"save_every", t.checkpoint_save_every},
        {"keep_last", t.checkpoint_keep_last},
        {"write_behind",
         t.checkpoint_write_behind == kWriteBehindAuto ? json("auto") : json(t.checkpoint_write_behind)}}},
      {"data",
       {{"path", string_or_null(t.data_path)},
        {"seq_len", t.data_seq_len},
        {"seed", t.data_seed},
        {"dtype", string_or_null(t.data_dtype)}}},
  };
  if (t.lora) out["lora"] = detail::lora_json(*t.lora);
  return out;
}

}  // namespace

json to_json(const DsConfig& c) {
  const LossScalerConfig& ls = c.fp16.loss_scaler;
  const OptimizerConfig& o = c.optimizer;
  const ActivationCheckpointingConfig& ac = c.activation_checkpointing;
  json out = {
      {"train_batch_size", c.batch.train_batch_size},
      {"train_micro_batch_size_per_gpu", c.batch.train_micro_batch_size_per_gpu},
      {"gradient_accumulation_steps", c.batch.gradient_accumulation_steps},
      {"fp16",
       {{"enabled", c.fp16.enabled},
        {"auto_cast", c.fp16.auto_cast},
        {"loss_scale", ls.static_scale},
        {"initial_scale_power", ls.initial_scale_power},
        {"loss_scale_window", ls.scale_window},
        {"hysteresis", ls.hysteresis},
        {"consecutive_hysteresis", ls.consecutive_hysteresis},
        {"min_loss_scale", ls.min_scale}}},
      {"bf16", {{"enabled", c.bf16.enabled}}},
      {"zero_optimization", zero_json(c.zero)},
      {"aio",
       {{"backend", nvme::backend_name(c.aio.backend)},
        {"block_size", c.aio.block_size},
        {"queue_depth", c.aio.queue_depth},
        {"intra_op_parallelism", c.aio.intra_op_parallelism},
        {"single_submit", c.aio.single_submit},
        {"overlap_events", c.aio.overlap_events},
        {"use_direct", c.aio.use_direct},
        {"register_buffers", c.aio.register_buffers}}},
      {"optimizer",
       {{"type", optimizer_type_name(o.type)},
        {"params",
         {{"lr", o.lr},
          {"betas", {o.beta1, o.beta2}},
          {"eps", o.eps},
          {"weight_decay", o.weight_decay},
          {"bias_correction", o.bias_correction},
          {"adam_w_mode", o.adam_w_mode},
          {"torch_adam", o.torch_adam}}}}},
      {"gradient_clipping", c.gradient_clipping},
      {"activation_checkpointing",
       {{"partition_activations", ac.partition_activations},
        {"cpu_checkpointing", ac.cpu_checkpointing},
        {"contiguous_memory_optimization", ac.contiguous_memory_optimization},
        {"number_checkpoints", ac.number_checkpoints == 0 ? json(nullptr) : json(ac.number_checkpoints)},
        {"synchronize_checkpoint_boundary", ac.synchronize_checkpoint_boundary},
        {"profile", ac.profile}}},
      {"steps_per_print", c.steps_per_print},
      {"wall_clock_breakdown", c.wall_clock_breakdown},
      {"tierzero", tierzero_json(c.tierzero)},
  };
  // The HF Trainer's AdamW and linear schedule are no DeepSpeed sections: left out, as in the input.
  if (c.optimizer_from_flags) out.erase("optimizer");
  if (c.scheduler && !(c.optimizer_from_flags && c.scheduler->type == LrScheduleType::kLinear))
    out["scheduler"] = scheduler_json(*c.scheduler);
  return out;
}

}  // namespace tierzero::engine
