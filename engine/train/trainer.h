// `tierzero train`: a whole training run from a ds_config, a model and a token file, on every rank
// of the process group torchrun describes (or one process). Rank 0 prints one line per printed
// step (every steps_per_print, the first and the last: loss, lr, tokens/s, TFLOPS, the step's true
// GPU peak, pinned / pageable host and NVMe bytes, the epoch), an `eval:` line per evaluation of
// held-out data (internal/evaluation.h) and a `done:` summary at the end. The session
// behind it (set-up, step loop, report, saves) is engine/train/internal/session.h.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/common.h"
#include "engine/config/ds_config.h"

namespace tierzero::engine {

// What a failed periodic save does (--on-save-error). kContinue: training goes on, the last good
// checkpoint stays as it was, the failed save's partial output is removed, a warning goes to stderr
// and the next save due tries again. kStop: the run ends with the error. A failed final save always
// ends the run with an error naming the checkpoint kept.
enum class SaveErrorPolicy : uint8_t { kContinue, kStop };

struct TrainArgs {
  std::string config_path;        // ds_config JSON; empty: configs/tiny.json
  std::string model_dir;          // HF checkpoint directory (config.json + safetensors)
  std::string model_config_path;  // HF config.json for a randomly initialised model
  std::string data_path;          // token file / JSONL; empty: the config's tierzero.data.path
  int64_t steps = 0;              // optimizer steps (--steps, >= 1); 0: not given (the scheduler's
                                  // total_num_steps, else 100)
  double epochs = 0.0;            // --epochs: passes over the data, the steps following from them
                                  // (internal/epochs.h); 0: not given. With steps, they must agree
  std::string eval_data_path;     // --eval-data: held-out data (the formats of data_path); empty: none
  double eval_fraction = 0.0;     // --eval-fraction: share of data_path's samples held out instead; 0: none
  int64_t eval_every = 0;         // --eval-every: evaluate every N steps (and at the end); 0: at the end only
  // Called on every rank with the sample indices of each training micro-batch as it is read (tests
  // compare the sequences of two runs); empty: not called.
  std::function<void(const std::vector<int64_t>& sample_indices)> on_micro_batch;
  std::string save_dir;           // engine checkpoint written at the end (with the 16-bit model
                                  // beside it when stage3_gather_16bit_weights_on_model_save); empty: none
  std::string export_dir;         // HF model directory (16-bit safetensors) written at the end; empty: none
  std::string resume_dir;         // engine checkpoint to continue from; empty: start fresh
  int64_t save_every = 0;         // also save every N steps into save_dir; 0: tierzero.checkpoint.save_every
  int64_t keep_last = -1;         // checkpoints kept in save_dir; 0: all; -1: tierzero.checkpoint.keep_last
  SaveErrorPolicy on_save_error = SaveErrorPolicy::kContinue;  // a failed periodic save
  std::string metrics_path;       // one JSON line per step here (report/METRICS.md), rank 0; empty: none
  std::string tensorboard_dir;    // TensorBoard event file written here, rank 0; empty: none
  uint64_t init_seed = 1234;      // random initialisation (without model_dir)
  bool full_determinism = false;  // --full-determinism: the same bits run to run on a GPU (use_full_determinism)
  std::string profile_path;       // --profile: a Chrome trace of one step here (internal/step_trace.h); empty: none
  int64_t profile_step = 0;       // --profile-step: the step traced (as step lines number it); 0: the second one run
  TrainerFlags trainer_flags;     // --micro-batch, --lr, --bf16, ...: what the ds_config's "auto" takes
};

// One evaluation of the held-out data (--eval-data / --eval-fraction).
struct EvalPoint {
  int64_t step = 0;         // after this optimizer step
  double loss = 0.0;        // mean cross-entropy over the eval set's target tokens
  double perplexity = 0.0;  // exp(loss)
  int64_t tokens = 0;       // target tokens evaluated
};

struct TrainSummary {
  int64_t steps = 0;          // optimizer steps taken in this run (skipped ones included)
  int64_t skipped_steps = 0;  // fp16 overflows
  double first_loss = 0.0;
  double last_loss = 0.0;
  std::vector<double> losses;  // each step's loss (mean over ranks), in order
  std::vector<EvalPoint> evals;  // the evaluations, in order (none without eval data)
  double epochs = 0.0;           // epochs of the training data done at the end (1.5: one and a half)
  double seconds = 0.0;
  double tokens_per_second = 0.0;
  int64_t gpu_peak_bytes = -1;  // the largest step's allocator peak (memory_figures.h); -1 on the CPU
  int64_t pinned_bytes = 0;     // the most pinned host memory the engine held after a step
  int64_t pageable_bytes = 0;   // the most resident, unpinned host memory after a step
};

// Runs the training `args` describe; rank 0 writes progress to `out`. Relative paths that do not
// exist from the working directory are looked up in the source tree (so a plain `tierzero train`
// finds configs/tiny.json and its bundled data from anywhere). Errors name the file or key.
Result<TrainSummary> train(const TrainArgs& args, std::FILE* out);

}  // namespace tierzero::engine
