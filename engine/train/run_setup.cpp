#include "engine/train/internal/run_setup.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#ifdef TIERZERO_ENGINE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <unistd.h>

#include <cstdlib>

namespace tierzero::engine::trainer {
namespace {

constexpr const char* kDefaultConfig = "configs/tiny.json";
constexpr int64_t kDefaultSteps = 100;

}  // namespace

std::string resolve_path(const std::string& path) {
  if (path.empty() || path.front() == '/' || access(path.c_str(), F_OK) == 0) return path;
  std::string in_source = std::string(TIERZERO_SOURCE_DIR) + "/" + path;
  return access(in_source.c_str(), F_OK) == 0 ? in_source : path;
}

at::Device pick_device() {
  if (!at::hasCUDA()) return at::kCPU;
  const char* local_rank = std::getenv("LOCAL_RANK");
  auto index = static_cast<c10::DeviceIndex>(local_rank ? std::atoi(local_rank) : 0);
#ifdef TIERZERO_ENGINE_CUDA
  c10::cuda::set_device(index);
#endif
  return at::Device(at::kCUDA, index);
}

void use_full_determinism() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

void choose_cpu_threads(at::Device device, int64_t parameters) {
  constexpr int64_t kSmallModel = 50'000'000;
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if ((omp == nullptr || *omp == '\0') && device.is_cpu() && parameters < kSmallModel) at::set_num_threads(1);
}

Result<ModelAndWeights> load_model(const TrainArgs& args) {
  ModelAndWeights m;
  if (!args.model_dir.empty()) {
    TZ_ASSIGN_OR_RETURN(m.config, load_model_config(args.model_dir));
    TZ_ASSIGN_OR_RETURN(m.config_json, read_model_config_text(args.model_dir));
    TZ_ASSIGN_OR_RETURN(m.weights, open_safetensors_params(args.model_dir));
    m.from_checkpoint = true;
    m.description = args.model_dir;
    return m;
  }
  if (!args.model_config_path.empty()) {
    const std::string path = resolve_path(args.model_config_path);
    TZ_ASSIGN_OR_RETURN(m.config, load_model_config(path));
    TZ_ASSIGN_OR_RETURN(m.config_json, read_model_config_text(path));
    m.description = args.model_config_path + " (random init)";
  } else {
    m.config = tiny_llama_config();
    m.config_json = to_hf_json(m.config);
    m.description = "built-in tiny Llama (random init)";
  }
  return m;
}

void init_random_weights(const TrainArgs& args, ModelAndWeights& model) {
  if (!model.from_checkpoint) model.weights = random_init_params(model.config, args.init_seed);
}

Result<LoadedConfig> load_config(const TrainArgs& args, int world_size, const ModelConfig& model) {
  ResolveHints hints;
  hints.world_size = world_size;
  hints.model.hidden_size = model.hidden_size;
  hints.total_steps = args.steps;
  hints.flags = args.trainer_flags;
  hints.training = true;
  LoadedConfig loaded;
  loaded.path = resolve_path(args.config_path.empty() ? kDefaultConfig : args.config_path);
  TZ_ASSIGN_OR_RETURN(loaded.config, load_ds_config(loaded.path, hints));
  const int64_t seq_len = loaded.config.tierzero.data_seq_len;
  // Dynamic NTK scaling stretches RoPE past max_position_embeddings by design.
  if (model.max_position_embeddings > 0 && seq_len > model.max_position_embeddings &&
      model.rope_scaling.type != "dynamic") {
    return invalid_argument("sequence length " + std::to_string(seq_len) +
                            (args.trainer_flags.seq_len ? " (--seq-len)" : " (" + loaded.path + ": tierzero.data.seq_len)") +
                            " is above the model's max_position_embeddings " +
                            std::to_string(model.max_position_embeddings) +
                            " (config.json): positions past it were never trained; use a seq_len of at most " +
                            std::to_string(model.max_position_embeddings));
  }
  return loaded;
}

Result<TrainingData> open_data(const TrainArgs& args, const LoadedConfig& loaded, int rank, int world_size) {
  const DsConfig& config = loaded.config;
  TrainingData data;
  data.path = resolve_path(args.data_path.empty() ? config.tierzero.data_path : args.data_path);
  if (data.path.empty())
    return invalid_argument(loaded.path + ": no training data: pass --data FILE or set tierzero.data.path");
  std::optional<TokenDtype> token_dtype;
  if (!config.tierzero.data_dtype.empty()) {
    TZ_ASSIGN_OR_RETURN(token_dtype, parse_token_dtype(config.tierzero.data_dtype));
  }
  // JSONL of text is tokenized with the tokenizer of the --model directory.
  TZ_ASSIGN_OR_RETURN(data.samples, open_samples(data.path, config.tierzero.data_seq_len, token_dtype, args.model_dir));
  if (args.eval_fraction > 0.0) {
    TZ_ASSIGN_OR_RETURN(HeldOutSplit split,
                        split_held_out(data.samples, args.eval_fraction, config.tierzero.data_seed, data.path));
    data.samples = std::move(split.train);
    data.held_out = std::move(split.held_out);
  }
  TZ_ASSIGN_OR_RETURN(MicroBatchIterator batches,
                      MicroBatchIterator::create(
                          data.samples, ShardSpec{.seed = config.tierzero.data_seed,
                                                  .rank = rank,
                                                  .world_size = world_size,
                                                  .micro_batch_size = config.batch.train_micro_batch_size_per_gpu}));
  data.batches = std::make_unique<MicroBatchIterator>(std::move(batches));
  return data;
}

int64_t planned_steps(const TrainArgs& args, const DsConfig& config) {
  if (args.steps > 0) return args.steps;
  if (config.scheduler && config.scheduler->total_num_steps > 0) return config.scheduler->total_num_steps;
  return kDefaultSteps;
}

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

}  // namespace tierzero::engine::trainer
