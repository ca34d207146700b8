// Private: `train --metrics FILE` — the metrics JSONL (format: report/METRICS.md), written by rank 0
// through report::MetricsWriter: the run line first, then one line per optimizer step, each flushed;
// and `train --tensorboard DIR` — the same steps as a TensorBoard event file (report::TensorBoardWriter).
// Evaluations (evaluation.h) add an eval line / event after their step's; a durable checkpoint a
// save line.
#pragma once

#include <optional>
#include <string>

#include "common/common.h"
#include "engine/train/internal/evaluation.h"
#include "engine/train/internal/step_report.h"
#include "report/report.h"

namespace tierzero::engine::trainer {

class MetricsLog {
 public:
  // A log that writes nothing (no --metrics or --tensorboard, or not rank 0).
  MetricsLog() = default;
  // Creates `path` and writes the run line, and an event file in `tensorboard_dir`; an empty one
  // is not written. Errors name the path.
  static Result<MetricsLog> open(const std::string& path, const std::string& tensorboard_dir,
                                 const report::RunInfo& run);

  // Appends `record`'s line (and event), `run_gpu_peak_bytes` being the GPU peak since the run began (the
  // format's gpu_peak_bytes). Nothing when the log writes nothing.
  Status write(const StepRecord& record, int64_t run_gpu_peak_bytes);
  // Appends an evaluation's eval line (and event). Nothing when the log writes nothing.
  Status write_eval(const EvalResult& result);
  // Appends a durable checkpoint's save line (the JSONL only: TensorBoard has no such event).
  // Nothing when the log writes nothing.
  Status write_save(const report::SaveMetrics& save);

 private:
  std::optional<report::MetricsWriter> writer_;
  std::optional<report::TensorBoardWriter> tensorboard_;
};

}  // namespace tierzero::engine::trainer
