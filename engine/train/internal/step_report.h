// Private: what rank 0 prints — the start-up header, one line per printed step, the `done:` line
// (step_report.cpp). Memory fields are defined in memory_figures.h.
//
// A step line:
//   step    12/100  loss 5.1234  lr 3.000e-03  grad-norm 1.234  12345 tok/s  0.0123 TFLOPS
//     gpu-peak 1.2 GiB  gpu-reserved 1.5 GiB  pinned 0 B  pageable 812 MiB  nvme 0 B  0.31s  epoch 1.37
//     [time forward 0.100s backward 0.180s grad-d2h ... gpu-idle 0.010s]
//     [nvme-io read 11.2 GiB written 11.2 GiB]  [overflow: step skipped]
// (one line; the bracketed parts only when wall_clock_breakdown is on / the optimizer state is on
// NVMe (the last finished optimizer step's bytes: at stage 3 it runs on into the next step) / the
// fp16 step overflowed). `epoch` is the epochs of the training data done after the step (epochs.h).
// An evaluation prints its own `eval:` line after its step's (evaluation.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

#include "engine/train/internal/memory_figures.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::trainer {

struct StepRecord {
  int64_t step = 0;   // 1-based optimizer step
  int64_t steps = 0;  // the run's last step
  double loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;
  double seconds = 0.0;
  double tokens_per_s = 0.0;
  double tflops = 0.0;
  bool overflow = false;
  double epoch = 0.0;  // epochs of the training data done after this step
  MemoryFigures memory;
  std::optional<StepTimes> times;  // the engine's breakdown, with wall_clock_breakdown
  // The last finished optimizer step's NVMe traffic, with state on NVMe (plus a LoRA base's reads
  // since the last line when the base is there).
  std::optional<NvmeTraffic> nvme_io;
};

// True for the steps whose line is printed: every `every`-th, the first of the run and the last.
bool should_print(int64_t step, int64_t first_step, int64_t last_step, int64_t every);

// The step line (no newline).
std::string format_step_line(const StepRecord& record);

// What the `done:` line summarises.
struct RunTotals {
  int64_t steps = 0;
  int64_t skipped_steps = 0;
  double seconds = 0.0;
  double first_loss = 0.0;
  double last_loss = 0.0;
  double tokens_per_s = 0.0;
  double tflops = 0.0;
  double epochs = 0.0;  // epochs of the training data done at the end
  std::optional<double> eval_loss;  // the last evaluation's, with eval data
  MemoryFigures peak;  // the largest of each field over the run's steps
  std::string saved_to;
  std::string exported_to;
};

// The `done:` line (no newline).
std::string format_done_line(const RunTotals& totals);

// "1.5 GiB", or "-" for a negative byte count (no GPU).
std::string bytes_text(int64_t bytes);

}  // namespace tierzero::engine::trainer
