// `train --tensorboard DIR`: the training metrics as TensorBoard event files, one scalar per tag
// with the optimizer step as the step (tags: tensorboard_scalars). Format: tensorboard_event.h.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"
#include "report/internal/metrics.h"

namespace tierzero::report {

// The scalars TensorBoard shows for `step`, as (tag, value):
//   train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/tflops, train/step_time_s;
//   memory/gpu_peak_GiB, memory/gpu_reserved_GiB, memory/pinned_GiB, memory/pageable_GiB, memory/nvme_GiB;
//   bandwidth/h2d_GBps, bandwidth/d2h_GBps, bandwidth/nvme_read_GBps, bandwidth/nvme_write_GBps (when measured);
//   time/forward_s, time/backward_s, time/grad_d2h_s, time/cpu_optimizer_s, time/param_h2d_s, time/comm_s,
//   time/gpu_idle_s (when the step has a breakdown); train/epoch (when known).
// A value that is not finite (a skipped fp16 step's loss) is left out.
std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& step);
// The scalars of an evaluation, at its step: eval/loss, eval/perplexity (each when finite).
std::vector<std::pair<std::string, double>> tensorboard_scalars(const EvalMetrics& eval);

// Writes one event file; rank 0 alone writes. Every event is flushed as written, so TensorBoard
// follows a run live and a run that dies leaves every finished step readable. Not thread-safe.
class TensorBoardWriter {
 public:
  // Creates `dir` (and its parents) when missing and in it a new event file,
  // events.out.tfevents.<unix seconds>.<host>.<pid>.tierzero, holding the file_version event.
  // Error (kIo) names the directory or file and what to do.
  static Result<TensorBoardWriter> open(const std::string& dir);

  // Appends one event with tensorboard_scalars(step), stamped with the wall time; flushed.
  // Error (kIo) names the file and the step.
  Status write_step(const StepMetrics& step);
  // Appends one event with tensorboard_scalars(eval) at the evaluation's step; flushed. Errors as write_step.
  Status write_eval(const EvalMetrics& eval);

  const std::string& path() const { return path_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const;
  };
  TensorBoardWriter(std::string path, std::unique_ptr<std::FILE, FileCloser> file);
  Status write_event(const std::string& event, const std::string& what);

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

}  // namespace tierzero::report
