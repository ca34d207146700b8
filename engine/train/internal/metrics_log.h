// Private: `train --metrics FILE` — the metrics JSONL (format: report/METRICS.md), written by rank 0
// through report::MetricsWriter: the run line first, then one line per optimizer step, each flushed.
#pragma once

#include <optional>
#include <string>

#include "common/common.h"
#include "engine/train/internal/step_report.h"
#include "report/report.h"

namespace tierzero::engine::trainer {

class MetricsLog {
 public:
  // A log that writes nothing (no --metrics, or not rank 0).
  MetricsLog() = default;
  // Creates `path` and writes the run line; errors name the path.
  static Result<MetricsLog> open(const std::string& path, const report::RunInfo& run);

  // Appends `record`'s line, `run_gpu_peak_bytes` being the GPU peak since the run began (the
  // format's gpu_peak_bytes). Nothing when the log writes nothing.
  Status write(const StepRecord& record, int64_t run_gpu_peak_bytes);

 private:
  explicit MetricsLog(report::MetricsWriter writer) : writer_(std::move(writer)) {}
  std::optional<report::MetricsWriter> writer_;
};

}  // namespace tierzero::engine::trainer
