#include "engine/train/internal/engine_options.h"

#include <fmt/format.h>

#include <string>

#include "cpu_adam/adam.h"

namespace tierzero::engine::trainer {
namespace {

Status refuse_what_the_engine_cannot_do(const ZeroConfig& zero) {
  if (zero.offload_param.device == OffloadDevice::kNvme && zero.offload_optimizer.device == OffloadDevice::kNone)
    return unsupported(
        "zero_optimization.offload_param.device=\"nvme\" needs zero_optimization.offload_optimizer.device "
        "\"cpu\" or \"nvme\" (the CPU optimizer writes the new weights to NVMe); offload the optimizer, or use "
        "offload_param \"cpu\"");
  if (zero.offload_optimizer.device != OffloadDevice::kNone && zero.offload_optimizer.ratio < 1.0)
    return unsupported("zero_optimization.offload_optimizer.ratio=" + std::to_string(zero.offload_optimizer.ratio) +
                       " (partial optimizer offload) is not supported: set it to 1 (all of the optimizer on the "
                       "CPU) or remove offload_optimizer");
  return Status();
}

// The GPU share needs a GPU to step on (its layout check_engine_settings holds).
Status refuse_a_share_without_a_gpu(double share) {
  if (share > 0.0 && cpu_adam::cuda_device_count() == 0)
    return invalid_argument(fmt::format("tierzero.gpu_optimizer_share {}", share) +
                            " steps a share of the optimizer on a CUDA device, and none is found here (no driver, no "
                            "device, or a build without CUDA): set it to 0");
  return Status();
}

}  // namespace

at::ScalarType compute_dtype_of(Precision precision) {
  switch (precision) {
    case Precision::kFp16: return at::kHalf;
    case Precision::kBf16: return at::kBFloat16;
    case Precision::kFp32: return at::kFloat;
  }
  return at::kFloat;
}

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp32: return "fp32";
  }
  return "?";
}

int checkpoint_compression_level(const DsConfig& config) {
  return config.tierzero.checkpoint_compression == CheckpointCompression::kZstd
             ? config.tierzero.checkpoint_compression_level
             : 0;
}

Result<ZeroEngineOptions> engine_options(const DsConfig& config) {
  TZ_RETURN_IF_ERROR(refuse_what_the_engine_cannot_do(config.zero));
  TZ_RETURN_IF_ERROR(check_engine_settings(engine_settings(config)));
  TZ_RETURN_IF_ERROR(refuse_a_share_without_a_gpu(config.tierzero.gpu_optimizer_share));
  ZeroEngineOptions options;
  PartitionOptions& partition = options.partition;
  partition.stage = config.zero.stage;
  partition.compute_dtype = compute_dtype_of(config.precision());
  partition.grad_dtype = config.tierzero.grad_accum_dtype == GradAccumDtype::kBf16 ? at::kBFloat16 : at::kFloat;
  partition.reduce_bucket_numel = static_cast<int64_t>(config.zero.reduce_bucket_size);
  partition.prefetch_numel = static_cast<int64_t>(config.zero.prefetch_bucket_size);
  partition.persistence_threshold = static_cast<int64_t>(config.zero.param_persistence_threshold);
  partition.max_live_numel = static_cast<int64_t>(config.zero.max_live_parameters);
  partition.max_reuse_distance = static_cast<int64_t>(config.zero.max_reuse_distance);
  partition.offload_params = config.zero.offload_param.device != OffloadDevice::kNone;
  if (config.param_shard_on_nvme())
    options.nvme_params = {.paths = config.zero.offload_param.nvme_paths,
                           .buffer_count = static_cast<int>(config.zero.offload_param.buffer_count),
                           .buffer_numel = static_cast<int64_t>(config.zero.offload_param.buffer_size),
                           .max_in_cpu = static_cast<int64_t>(config.zero.offload_param.max_in_cpu),
                           .io = config.aio};
  partition.pin_offloaded_params = config.zero.offload_param.pin_memory;
  options.adam.beta1 = config.optimizer.beta1;
  options.adam.beta2 = config.optimizer.beta2;
  options.adam.eps = config.optimizer.eps;
  options.adam.weight_decay = config.optimizer.weight_decay;
  options.adam.decoupled_weight_decay = config.optimizer.decoupled_weight_decay();
  options.adam.bias_correction = config.optimizer.bias_correction;
  options.offload_optimizer = config.zero.offload_optimizer.device != OffloadDevice::kNone;
  if (config.zero.offload_optimizer.device == OffloadDevice::kNvme)
    options.nvme_optimizer = {.paths = config.zero.offload_optimizer.nvme_paths,
                              .buffer_count = static_cast<int>(config.zero.offload_optimizer.buffer_count),
                              .pipeline_read = config.zero.offload_optimizer.pipeline_read,
                              .pipeline_write = config.zero.offload_optimizer.pipeline_write,
                              .io = config.aio};
  switch (config.tierzero.optimizer_state_dtype) {
    case OptimizerStateDtype::kFp32: options.optimizer_state_dtype = at::kFloat; break;
    case OptimizerStateDtype::kBf16: options.optimizer_state_dtype = at::kBFloat16; break;
    case OptimizerStateDtype::kInt8: options.optimizer_state_dtype = at::kChar; break;  // 8-bit blockwise m, v
  }
  options.master_layout =
      config.tierzero.master_weights == MasterWeights::kCompact ? MasterLayout::kCompact : MasterLayout::kFp32;
  options.offload_grad_dtype =
      config.tierzero.offload_grad_dtype == OffloadGradDtype::kBf16 ? at::kBFloat16 : at::kFloat;
  options.grad_ring_records = config.tierzero.grad_ring_records;
  options.gpu_optimizer_share = config.tierzero.gpu_optimizer_share;
  options.optimizer_records_in_memory = config.tierzero.optimizer_records_in_memory == kOptimizerRecordsAuto
                                            ? kRecordsByBudget
                                            : config.tierzero.optimizer_records_in_memory;
  options.cpu_threads = config.tierzero.cpu_threads;
  options.gradient_clipping = config.gradient_clipping;
  options.sub_group_size = static_cast<int64_t>(config.zero.sub_group_size);
  options.overlap_offload = config.zero.overlap_comm;
  options.grad_staging_buffers = static_cast<int>(config.zero.offload_optimizer.buffer_count);
  switch (config.tierzero.offload_grad_accumulator) {
    case OffloadGradAccumulator::kAuto: options.grad_accumulator = GradAccumulator::kAuto; break;
    case OffloadGradAccumulator::kDevice: options.grad_accumulator = GradAccumulator::kDevice; break;
    case OffloadGradAccumulator::kHost: options.grad_accumulator = GradAccumulator::kHost; break;
  }
  options.gradient_accumulation_steps = config.batch.gradient_accumulation_steps;
  options.pinned_memory_limit_bytes = config.tierzero.pinned_memory_limit;
  options.gpu_memory_limit_bytes = config.tierzero.gpu_memory_limit;
  options.time_breakdown = config.wall_clock_breakdown;
  return options;
}

}  // namespace tierzero::engine::trainer
