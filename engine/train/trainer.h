// `tierzero train`: a whole training run from a ds_config, a model and a token file, on every rank
// of the process group torchrun describes (or one process). Rank 0 prints one line per optimizer
// step (loss, lr, tokens/s, TFLOPS, GPU / pinned / NVMe bytes in use) and a summary at the end.
//
// The step, as every rank runs it:
//   for each of gradient_accumulation_steps micro-batches of this rank's data:
//       loss += engine.forward_backward(ids, targets, loss_scale / accumulation_steps)
//   outcome = engine.step(lr, loss_scale)       // fp16 overflow: skipped, gradients dropped
//   loss_scaler.update(outcome.overflow);  if not overflow: lr_schedule.step()
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/status.h"

namespace tierzero::engine {

struct TrainArgs {
  std::string config_path;        // ds_config JSON; empty: configs/tiny.json
  std::string model_dir;          // HF checkpoint directory (config.json + safetensors)
  std::string model_config_path;  // HF config.json for a randomly initialised model
  std::string data_path;          // token file / JSONL; empty: the config's tierzero.data.path
  int64_t steps = 0;              // optimizer steps; 0: the scheduler's total_num_steps, else 100
  std::string save_dir;           // engine checkpoint written at the end (with the 16-bit model
                                  // beside it when stage3_gather_16bit_weights_on_model_save); empty: none
  std::string export_dir;         // HF model directory (16-bit safetensors) written at the end; empty: none
  std::string resume_dir;         // engine checkpoint to continue from; empty: start fresh
  uint64_t init_seed = 1234;      // random initialisation (without model_dir)
};

struct TrainSummary {
  int64_t steps = 0;          // optimizer steps taken in this run (skipped ones included)
  int64_t skipped_steps = 0;  // fp16 overflows
  double first_loss = 0.0;
  double last_loss = 0.0;
  double seconds = 0.0;
  double tokens_per_second = 0.0;
};

// Runs the training `args` describe; rank 0 writes progress to `out`. Relative paths that do not
// exist from the working directory are looked up in the source tree (so a plain `tierzero train`
// finds configs/tiny.json and its bundled data from anywhere). Errors name the file or key.
Result<TrainSummary> train(const TrainArgs& args, std::FILE* out);

}  // namespace tierzero::engine
