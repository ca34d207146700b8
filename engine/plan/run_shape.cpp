// The sizes of one rank's run: dtypes, partition, buckets, what stage 3 keeps whole.
#include <algorithm>
#include <numeric>

#include "common/common.h"
#include "engine/plan/internal/model_params.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine::plan {

Result<RunShape> run_shape(const ModelDims& model, const DsConfig& config, const PlanOptions& options) {
  RunShape s;
  s.world = std::max(config.batch.world_size, 1);
  s.compute_bytes = config.precision() == Precision::kFp32 ? 4 : 2;
  s.grad_bytes = config.tierzero.grad_accum_dtype == GradAccumDtype::kBf16 ? 2 : 4;
  s.micro = config.batch.train_micro_batch_size_per_gpu;
  s.accum = config.batch.gradient_accumulation_steps;
  s.seq = options.seq_len > 0 ? options.seq_len : config.tierzero.data_seq_len;
  if (s.micro < 1 || s.accum < 1 || s.seq < 1)
    return invalid_argument("plan: train_micro_batch_size_per_gpu (" + std::to_string(s.micro) +
                            "), gradient_accumulation_steps (" + std::to_string(s.accum) +
                            ") and tierzero.data.seq_len (" + std::to_string(s.seq) + ") must be >= 1");
  const ZeroConfig& zero = config.zero;
  s.optimizer_offloaded = zero.offload_optimizer.device != OffloadDevice::kNone;
  s.optimizer_nvme = zero.offload_optimizer.device == OffloadDevice::kNvme;
  s.params_nvme = zero.stage == 3 && config.param_shard_on_nvme();
  s.params_cpu = zero.stage == 3 && zero.offload_param.device != OffloadDevice::kNone && !s.params_nvme;
  s.compute_on_cpu = options.compute_on_cpu;
  s.weights_from_checkpoint = options.weights_from_checkpoint;
  // The compact layouts only in the record optimizer (the engine refuses them on the GPU).
  if (s.optimizer_offloaded) {
    const TierzeroConfig& t = config.tierzero;
    s.layout.compact_master = t.master_weights == MasterWeights::kCompact;
    s.layout.moments = t.optimizer_state_dtype == OptimizerStateDtype::kInt8   ? state_layout::Moments::kInt8Blockwise
                       : t.optimizer_state_dtype == OptimizerStateDtype::kBf16 ? state_layout::Moments::kBf16
                                                                               : state_layout::Moments::kFp32;
    s.host_grad_bytes = t.offload_grad_dtype == OffloadGradDtype::kBf16 ? 2 : 4;
  }

  std::vector<int64_t> params = distinct_param_numels(model);
  std::vector<int64_t> units = unit_numels(model);
  if (config.tierzero.lora) {  // the engine's parameters are the adapters; the base is frozen beside them
    s.lora = true;
    s.frozen_nvme = zero.offload_param.device == OffloadDevice::kNvme;
    s.frozen_parameters = std::accumulate(params.begin(), params.end(), int64_t{0});
    s.frozen_largest_unit = *std::max_element(units.begin(), units.end());
    s.frozen_param_numels = params;
    s.frozen_unit_numels = unit_param_numels(model);
    params.clear();
    units.clear();
    TZ_ASSIGN_OR_RETURN(const std::vector<std::vector<int64_t>> adapters,
                        lora_unit_numels(model, *config.tierzero.lora));
    for (const std::vector<int64_t>& unit : adapters) {
      params.insert(params.end(), unit.begin(), unit.end());
      units.push_back(std::accumulate(unit.begin(), unit.end(), int64_t{0}));
      int64_t features = 0;  // A is [r, in]: every other numel, over r
      for (size_t a = 0; a < unit.size(); a += 2) features += unit[a] / config.tierzero.lora->r;
      if (config.tierzero.lora->lora_dropout > 0.0) s.lora_dropout_features = std::max(s.lora_dropout_features, features);
    }
  }
  s.parameters = std::accumulate(params.begin(), params.end(), int64_t{0});
  s.largest_param = *std::max_element(params.begin(), params.end());
  s.largest_unit = *std::max_element(units.begin(), units.end());
  s.follows_step = zero.stage == 3 && s.optimizer_offloaded && zero.overlap_comm;
  s.window_possible = zero.stage == 3 && (s.follows_step || s.params_offloaded());
  // The buckets as the engine cuts them (the same function).
  s.reduce_bucket = std::max<int64_t>(
      1, state_layout::reduce_bucket_numel(static_cast<int64_t>(zero.reduce_bucket_size), s.optimizer_offloaded,
                                           s.world, state_layout::kStagingSlotBytes));
  // The partition as the engine's partition_layout.h sizes it (common/internal/partition.h).
  const auto world = static_cast<uint32_t>(s.world);
  int64_t largest_shard = 0;
  if (zero.stage == 3) {
    for (int64_t n : params) {
      const auto piece = static_cast<int64_t>(partitioning::stage3_piece_numel(static_cast<uint64_t>(n), world));
      s.partition += piece;
      largest_shard = std::max(largest_shard, piece);
      (n <= static_cast<int64_t>(zero.param_persistence_threshold) ? s.persistent : s.nonpersistent) += n;
    }
    // Released parameters stay whole when reused within stage3_max_reuse_distance elements: the
    // units closest to the turn from forward to backward, about half that distance of them.
    s.kept_gathered = std::min<int64_t>(s.nonpersistent, static_cast<int64_t>(zero.max_reuse_distance / 2));
  } else {
    s.partition = zero.stage == 0 ? s.parameters
                                  : static_cast<int64_t>(partitioning::flat_partition_numel(
                                        static_cast<uint64_t>(s.parameters), world, partitioning::kDeepSpeedAlignment));
    s.padded = zero.stage == 0 ? s.partition : s.partition * s.world;
  }
  // The largest bucket landed, as the engine sizes it (the same function; the parameter count
  // matters at stage 3 only).
  s.landing = state_layout::landing_numel(zero.stage, s.partition, s.reduce_bucket, s.world,
                                          static_cast<int64_t>(params.size()),
                                          zero.stage == 3 ? largest_shard : s.largest_param);
  s.sub_group_size = static_cast<int64_t>(zero.sub_group_size);
  s.optimizer_buffers = static_cast<int>(zero.offload_optimizer.buffer_count);
  s.staging_slots = static_cast<int>(zero.offload_optimizer.buffer_count);
  s.grad_ring_records = s.optimizer_offloaded ? config.tierzero.grad_ring_records : 0;
  s.weights16_for_device = s.compute_bytes == 2 && !s.params_offloaded() && !s.compute_on_cpu;
  s.param_buffers = static_cast<int>(zero.offload_param.buffer_count);
  s.param_buffer_numel = static_cast<int64_t>(zero.offload_param.buffer_size);
  s.params_max_in_cpu = static_cast<int64_t>(zero.offload_param.max_in_cpu);
  s.params_pinned = s.params_cpu && zero.offload_param.pin_memory;
  s.gpu_optimizer_share = s.optimizer_offloaded && !s.compute_on_cpu ? config.tierzero.gpu_optimizer_share : 0.0;
  if (s.params_nvme)
    s.params_in_cpu = s.records().first_numel(
        state_layout::param_records_in_memory(s.params_max_in_cpu, s.partition, s.records().group()));
  return s;
}

}  // namespace tierzero::engine::plan
