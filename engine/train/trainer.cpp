#include "engine/train/trainer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#ifdef TIERZERO_ENGINE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "common/units.h"
#include "engine/config/ds_config.h"
#include "engine/optim/schedules.h"
#include "engine/data/token_data.h"
#include "engine/model/functional_model.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine {
namespace {

constexpr const char* kDefaultConfig = "configs/tiny.json";
constexpr int64_t kDefaultSteps = 100;

// `path` as given when it exists (or is absolute), else the same relative path in the source tree.
std::string resolve_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || access(path.c_str(), F_OK) == 0) return path;
  std::string in_source = std::string(TIERZERO_SOURCE_DIR) + "/" + path;
  return access(in_source.c_str(), F_OK) == 0 ? in_source : path;
}

// The compute device: CUDA device LOCAL_RANK when CUDA is available, else the CPU.
at::Device pick_device() {
  if (!at::hasCUDA()) return at::kCPU;
  const char* local_rank = std::getenv("LOCAL_RANK");
  auto index = static_cast<c10::DeviceIndex>(local_rank ? std::atoi(local_rank) : 0);
#ifdef TIERZERO_ENGINE_CUDA
  c10::cuda::set_device(index);
#endif
  return at::Device(at::kCUDA, index);
}

// Intra-op CPU threads for a model of `parameters` on `device`: OMP_NUM_THREADS when set; else one
// for small models on the CPU (their matmuls are too small to split, and OpenMP's spinning
// threads made the tiny default run 15x slower on a busy 2-core machine); else LibTorch's default.
void choose_cpu_threads(at::Device device, int64_t parameters) {
  constexpr int64_t kSmallModel = 50'000'000;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if ((omp == nullptr || *omp == '\0') && device.is_cpu() && parameters < kSmallModel) at::set_num_threads(1);
}

// Bytes the CUDA caching allocator has handed out on `device`; -1 on the CPU.
int64_t gpu_bytes_in_use(at::Device device) {
#ifdef TIERZERO_ENGINE_CUDA
  if (device.is_cuda()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
  }
#endif
  return -1;
}

std::string gpu_bytes_text(int64_t bytes) { return bytes < 0 ? "-" : format_bytes(static_cast<uint64_t>(bytes)); }

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

// Pinned host memory the engine holds: optimizer state and an offloaded parameter shard.
int64_t pinned_bytes(ZeroEngine& engine) {
  return engine.optimizer().pinned_bytes() + engine.partitioner().pinned_bytes();
}

// Engine options from a ds_config; kUnsupported for what is parsed but not yet implemented.
Result<ZeroEngineOptions> engine_options(const DsConfig& config) {
  if (config.zero.offload_optimizer.device == OffloadDevice::kNvme)
    return unsupported("zero_optimization.offload_optimizer.device=\"nvme\" is not yet supported (NVMe "
                       "offload lands with the offload issue); use \"cpu\" or \"none\"");
  if (config.zero.offload_param.device == OffloadDevice::kNvme)
    return unsupported("zero_optimization.offload_param.device=\"nvme\" is not yet supported; use \"cpu\" "
                       "(parameters in host memory) or \"none\"");
  ZeroEngineOptions options;
  options.partition.stage = config.zero.stage;
  options.partition.compute_dtype = compute_dtype_of(config.precision());
  options.partition.grad_dtype =
      config.tierzero.grad_accum_dtype == GradAccumDtype::kBf16 ? at::kBFloat16 : at::kFloat;
  options.partition.reduce_bucket_numel = static_cast<int64_t>(config.zero.reduce_bucket_size);
  options.partition.prefetch_numel = static_cast<int64_t>(config.zero.prefetch_bucket_size);
  options.partition.persistence_threshold = static_cast<int64_t>(config.zero.param_persistence_threshold);
  options.partition.max_live_numel = static_cast<int64_t>(config.zero.max_live_parameters);
  options.partition.max_reuse_distance = static_cast<int64_t>(config.zero.max_reuse_distance);
  options.adam.beta1 = config.optimizer.beta1;
  options.adam.beta2 = config.optimizer.beta2;
  options.adam.eps = config.optimizer.eps;
  options.adam.weight_decay = config.optimizer.weight_decay;
  options.adam.decoupled_weight_decay = config.optimizer.decoupled_weight_decay();
  options.adam.bias_correction = config.optimizer.bias_correction;
  options.offload_optimizer = config.zero.offload_optimizer.device == OffloadDevice::kCpu;
  options.partition.offload_params = config.zero.offload_param.device == OffloadDevice::kCpu;
  options.partition.pin_offloaded_params = config.zero.offload_param.pin_memory;
  options.cpu_threads = config.tierzero.cpu_threads;
  options.gradient_clipping = config.gradient_clipping;
  return options;
}

// The model and its initial weights: a HF checkpoint, a HF config with random weights, or the
// built-in tiny Llama.
struct ModelAndWeights {
  ModelConfig config;
  std::string config_json;  // the config.json text it came from (to_hf_json for the built-in model)
  std::string description;
  std::map<std::string, at::Tensor> weights;
};

Result<ModelAndWeights> load_model(const TrainArgs& args) {
  ModelAndWeights m;
  if (!args.model_dir.empty()) {
    TZ_ASSIGN_OR_RETURN(m.config, load_model_config(args.model_dir));
    TZ_ASSIGN_OR_RETURN(m.config_json, read_model_config_text(args.model_dir));
    TZ_ASSIGN_OR_RETURN(m.weights, load_hf_weights(args.model_dir, at::kFloat, at::kCPU));
    m.description = args.model_dir;
  } else {
    if (!args.model_config_path.empty()) {
      TZ_ASSIGN_OR_RETURN(m.config, load_model_config(resolve_path(args.model_config_path)));
      TZ_ASSIGN_OR_RETURN(m.config_json, read_model_config_text(resolve_path(args.model_config_path)));
      m.description = args.model_config_path + " (random init)";
    } else {
      m.config = tiny_llama_config();
      m.config_json = to_hf_json(m.config);
      m.description = "built-in tiny Llama (random init)";
    }
    m.weights = init_parameters(m.config, args.init_seed, at::kFloat, at::kCPU);
  }
  return m;
}

// One micro-batch as tensors [B, T].
std::pair<at::Tensor, at::Tensor> to_tensors(MicroBatch& batch) {
  at::Tensor ids = at::from_blob(batch.input_ids.data(), {batch.batch_size, batch.seq_len}, at::kLong);
  at::Tensor targets = at::from_blob(batch.targets.data(), {batch.batch_size, batch.seq_len}, at::kLong);
  return {ids.clone(), targets.clone()};
}

// Continues the data where the checkpoint left it. At the saved world size that is each rank's
// exact position; at another one the ranks' orders differ, so every rank continues at the same
// epoch and the same fraction of it (the global sample count consumed is kept).
Status restore_data_position(const CheckpointExtras& saved, MicroBatchIterator& data, int world_size,
                             int64_t micro_batch) {
  if (saved.data.is_null()) return Status();
  if (saved.saved_world_size == world_size) return data.load_state(saved.data);
  nlohmann::json position = data.state();
  const int64_t consumed = saved.data.value("index", int64_t{0}) * saved.saved_world_size;
  position["epoch"] = saved.data.value("epoch", int64_t{0});
  position["index"] = consumed / world_size / micro_batch * micro_batch;
  return data.load_state(position);
}

}  // namespace

Result<TrainSummary> train(const TrainArgs& args, std::FILE* out) {
  const at::Device device = pick_device();
  TZ_ASSIGN_OR_RETURN(std::unique_ptr<Comm> comm, Comm::from_env(device));
  const bool printer = comm->rank() == 0;

  if (!args.export_dir.empty()) TZ_RETURN_IF_ERROR(check_export_dir(args.export_dir));
  TZ_ASSIGN_OR_RETURN(ModelAndWeights model_and_weights, load_model(args));
  const ModelConfig& model_config = model_and_weights.config;
  std::unique_ptr<FunctionalModel> model = make_causal_lm(model_config);
  choose_cpu_threads(device, num_parameters(model_config));

  ResolveHints hints;
  hints.world_size = comm->world_size();
  hints.model.hidden_size = model_config.hidden_size;
  hints.total_steps = args.steps;
  std::string config_path = resolve_path(args.config_path.empty() ? kDefaultConfig : args.config_path);
  TZ_ASSIGN_OR_RETURN(DsConfig config, load_ds_config(config_path, hints));
  TZ_ASSIGN_OR_RETURN(ZeroEngineOptions options, engine_options(config));
  const int64_t steps = args.steps > 0                                   ? args.steps
                        : config.scheduler && config.scheduler->total_num_steps > 0 ? config.scheduler->total_num_steps
                                                                                     : kDefaultSteps;

  std::string data_path = resolve_path(args.data_path.empty() ? config.tierzero.data_path : args.data_path);
  if (data_path.empty())
    return invalid_argument(config_path + ": no training data: pass --data FILE or set tierzero.data.path");
  std::optional<TokenDtype> token_dtype;
  if (!config.tierzero.data_dtype.empty()) {
    TZ_ASSIGN_OR_RETURN(token_dtype, parse_token_dtype(config.tierzero.data_dtype));
  }
  TZ_ASSIGN_OR_RETURN(std::shared_ptr<const SampleSource> samples,
                      open_samples(data_path, config.tierzero.data_seq_len, token_dtype));
  const int64_t micro_batch = config.batch.train_micro_batch_size_per_gpu;
  const int64_t accumulation = config.batch.gradient_accumulation_steps;
  TZ_ASSIGN_OR_RETURN(MicroBatchIterator data,
                      MicroBatchIterator::create(samples, ShardSpec{.seed = config.tierzero.data_seed,
                                                                    .rank = comm->rank(),
                                                                    .world_size = comm->world_size(),
                                                                    .micro_batch_size = micro_batch}));

  LrScheduleConfig constant_lr{.type = LrScheduleType::kWarmupLR,
                               .warmup_min_lr = config.optimizer.lr,
                               .warmup_max_lr = config.optimizer.lr,
                               .warmup_num_steps = 1};
  TZ_ASSIGN_OR_RETURN(LrSchedule schedule, LrSchedule::create(config.scheduler.value_or(constant_lr)));
  TZ_ASSIGN_OR_RETURN(LossScaler scaler, LossScaler::create(config.loss_scaler_config()));

  ZeroEngine engine(*model, model_and_weights.weights, options, *comm);
  model_and_weights.weights.clear();
  int64_t first_step = 0;
  if (!args.resume_dir.empty()) {
    TZ_ASSIGN_OR_RETURN(CheckpointExtras saved, load_engine_checkpoint(args.resume_dir, engine));
    first_step = saved.iteration;
    if (!saved.loss_scaler.is_null()) TZ_RETURN_IF_ERROR(scaler.load_state(saved.loss_scaler));
    if (!saved.lr_scheduler.is_null()) TZ_RETURN_IF_ERROR(schedule.load_state(saved.lr_scheduler));
    TZ_RETURN_IF_ERROR(restore_data_position(saved, data, comm->world_size(), micro_batch));
  }

  const int64_t tokens_per_step = micro_batch * accumulation * comm->world_size() * samples->seq_len();
  const double flops_per_step = training_flops_per_token(model_config, samples->seq_len()) * tokens_per_step;
  if (printer) {
    for (const std::string& warning : config.warnings) std::fprintf(out, "warning: %s\n", warning.c_str());
    std::fprintf(out, "tierzero train: %s, %lld parameters (%lld layers, hidden %lld)\n",
                 model_and_weights.description.c_str(), static_cast<long long>(num_parameters(model_config)),
                 static_cast<long long>(model_config.num_hidden_layers),
                 static_cast<long long>(model_config.hidden_size));
    std::fprintf(out, "  data %s: %lld samples of %lld tokens | config %s\n", data_path.c_str(),
                 static_cast<long long>(samples->size()), static_cast<long long>(samples->seq_len()),
                 config_path.c_str());
    std::fprintf(out, "  ZeRO stage %d, %s, optimizer on %s | %d rank%s (%s) on %s, %d CPU thread%s | batch %lld = %lld x %lld x %d\n",
                 options.partition.stage, precision_name(config.precision()), engine.optimizer().placement().c_str(),
                 comm->world_size(), comm->world_size() > 1 ? "s" : "", comm->backend_name().c_str(),
                 device.str().c_str(), at::get_num_threads(), at::get_num_threads() > 1 ? "s" : "",
                 static_cast<long long>(micro_batch * accumulation * comm->world_size()),
                 static_cast<long long>(micro_batch), static_cast<long long>(accumulation), comm->world_size());
    if (first_step > 0) std::fprintf(out, "  resumed from %s at step %lld\n", args.resume_dir.c_str(),
                                     static_cast<long long>(first_step));
    std::fflush(out);
  }

  TrainSummary summary;
  const auto run_start = std::chrono::steady_clock::now();
  int64_t peak_gpu = 0;
  for (int64_t step = first_step; step < steps; ++step) {
    const auto step_start = std::chrono::steady_clock::now();
    const double loss_scale = scaler.scale();
    const double lr = schedule.lr();
    double loss_sum = 0.0;
    for (int64_t micro = 0; micro < accumulation; ++micro) {
      TZ_ASSIGN_OR_RETURN(MicroBatch batch, data.next());
      auto [ids, targets] = to_tensors(batch);
      loss_sum += engine.forward_backward(ids, targets, loss_scale / static_cast<double>(accumulation));
    }
    StepOutcome outcome = engine.step(lr, loss_scale);
    TZ_RETURN_IF_ERROR(scaler.update(outcome.overflow));
    if (!outcome.overflow) schedule.step();
    const double loss = engine.mean_over_ranks(loss_sum / static_cast<double>(accumulation));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();

    if (step == first_step) summary.first_loss = loss;
    summary.last_loss = loss;
    ++summary.steps;
    summary.skipped_steps += outcome.overflow;
    const int64_t gpu = gpu_bytes_in_use(device);
    peak_gpu = std::max(peak_gpu, gpu);
    if (printer) {
      std::fprintf(out,
                   "step %5lld/%lld  loss %.4f  lr %.3e  grad-norm %.3f  %8.0f tok/s  %.4f TFLOPS  gpu %s  pinned %s  "
                   "nvme %s  %.2fs%s\n",
                   static_cast<long long>(step + 1), static_cast<long long>(steps), loss, lr, outcome.grad_norm,
                   tokens_per_step / seconds, flops_per_step / seconds / 1e12, gpu_bytes_text(gpu).c_str(),
                   format_bytes(static_cast<uint64_t>(pinned_bytes(engine))).c_str(),
                   format_bytes(0).c_str(), seconds, outcome.overflow ? "  overflow: step skipped" : "");
      std::fflush(out);
    }
  }
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  summary.tokens_per_second = summary.steps * tokens_per_step / std::max(summary.seconds, 1e-9);

  if (!args.save_dir.empty()) {
    CheckpointExtras extras{.iteration = steps,
                            .loss_scaler = scaler.state(),
                            .lr_scheduler = schedule.state(),
                            .data = data.state(),
                            .model_config_json = model_and_weights.config_json};
    TZ_RETURN_IF_ERROR(save_engine_checkpoint(args.save_dir, engine, extras));
    if (config.zero.gather_16bit_weights_on_model_save)
      TZ_RETURN_IF_ERROR(save_16bit_model(engine, model_and_weights.config_json, args.save_dir));
  }
  if (!args.export_dir.empty()) {
    TZ_RETURN_IF_ERROR(
        export_16bit_model(engine, model_and_weights.config_json, args.export_dir, {.progress = printer}));
  }
  if (printer) {
    std::fprintf(out,
                 "done: %lld steps (%lld skipped) in %.1f s | loss %.4f -> %.4f | %.0f tok/s | %.4f TFLOPS | "
                 "peak gpu %s | pinned %s%s%s%s%s\n",
                 static_cast<long long>(summary.steps), static_cast<long long>(summary.skipped_steps), summary.seconds,
                 summary.first_loss, summary.last_loss, summary.tokens_per_second,
                 summary.steps * flops_per_step / std::max(summary.seconds, 1e-9) / 1e12,
                 gpu_bytes_text(device.is_cuda() ? peak_gpu : -1).c_str(),
                 format_bytes(static_cast<uint64_t>(pinned_bytes(engine))).c_str(),
                 args.save_dir.empty() ? "" : " | saved to ", args.save_dir.c_str(),
                 args.export_dir.empty() ? "" : " | exported to ", args.export_dir.c_str());
    std::fflush(out);
  }
  return summary;
}

}  // namespace tierzero::engine
