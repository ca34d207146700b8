// Private: the pieces a training session is set up from — device, model, data, resume — each a
// short function of the arguments and the config (run_setup.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/common.h"
#include "engine/config/ds_config.h"
#include "engine/data/token_data.h"
#include "engine/model/functional_model.h"
#include "engine/train/trainer.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::trainer {

// `path` as given when it exists (or is absolute), else the same relative path in the source tree
// (so a plain `tierzero train` finds configs/tiny.json and its data from anywhere).
std::string resolve_path(const std::string& path);

// The compute device: CUDA device LOCAL_RANK when CUDA is available (made current), else the CPU.
at::Device pick_device();

// --full-determinism (the HF Trainer's full_determinism), called before any CUDA work: LibTorch's
// deterministic algorithms on, an op without one an error rather than a warning (flash attention's
// backward then sums dq without atomics), cuDNN deterministic and not autotuned, and cuBLAS's
// workspace fixed (CUBLAS_WORKSPACE_CONFIG=:4096:8 unless the environment sets it). Two runs on one
// GPU then give the same bits, so a resumed run can be compared with an unbroken one; without it the
// attention backward's gradients differ in their last bits from run to run. The CPU path is
// deterministic either way.
void use_full_determinism();

// Intra-op CPU threads for a model of `parameters` on `device`: OMP_NUM_THREADS when set; else one
// for small models on the CPU (their matmuls are too small to split, and OpenMP's spinning threads
// made the tiny default run 15x slower on a busy 2-core machine); else LibTorch's default.
void choose_cpu_threads(at::Device device, int64_t parameters);

// The model and its initial weights: a HF checkpoint (args.model_dir), a HF config.json with random
// weights (args.model_config_path), or the built-in tiny Llama. load_model() reads the config and
// opens a checkpoint (nothing of the model's size is allocated); init_random_weights() then gives a
// model without a checkpoint its random source. Errors name the file.
struct ModelAndWeights {
  ModelConfig config;
  std::string config_json;  // the config.json text it came from (to_hf_json for the built-in model)
  std::string description;
  // Where the engine reads the initial weights, each rank its shard: the HF checkpoint's safetensors
  // (from_checkpoint), or init_parameters' values redrawn a parameter at a time (random_init_params).
  std::unique_ptr<ParamSource> weights;
  bool from_checkpoint = false;
};
Result<ModelAndWeights> load_model(const TrainArgs& args);
// Makes model.weights args.init_seed's random initialisation (random_init_params: the values of
// init_parameters, never the whole model in memory) unless the model streams from a checkpoint.
void init_random_weights(const TrainArgs& args, ModelAndWeights& model);

// The ds_config `args` name (configs/tiny.json when none), resolved for `world_size` ranks, the
// model's hidden size and args' flags ("auto", ds_config.h). `path` is the file actually read. A
// sequence length above the model's max_position_embeddings is an error naming both.
struct LoadedConfig {
  DsConfig config;
  std::string path;
};
Result<LoadedConfig> load_config(const TrainArgs& args, int world_size, const ModelConfig& model);

// This rank's training data: args.data_path, else the config's tierzero.data.path; with
// args.eval_fraction, the samples split_held_out() leaves for training (the others in `held_out`).
// Errors name the config and the missing key, or the data file.
struct TrainingData {
  std::string path;
  std::shared_ptr<const SampleSource> samples;
  std::unique_ptr<MicroBatchIterator> batches;
  std::shared_ptr<const SampleSource> held_out;  // --eval-fraction's samples, else null
};
Result<TrainingData> open_data(const TrainArgs& args, const LoadedConfig& config, int rank, int world_size);

// The optimizer steps to run: args.steps, else the scheduler's total_num_steps, else 100.
int64_t planned_steps(const TrainArgs& args, const DsConfig& config);

// Continues the data where the checkpoint left it. At the saved world size that is each rank's
// exact position; at another one the ranks' orders differ, so every rank continues at the same
// epoch and the same fraction of it (the global sample count consumed is kept).
Status restore_data_position(const CheckpointExtras& saved, MicroBatchIterator& data, int world_size,
                             int64_t micro_batch);

}  // namespace tierzero::engine::trainer
