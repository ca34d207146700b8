// The metrics file's lines as JSON objects, both ways; the field names live only here.
#pragma once

#include <nlohmann/json.hpp>

#include "report/internal/metrics.h"

namespace tierzero::report::internal {

// {"type":"run","format":kMetricsFormat, ...} for `run`.
nlohmann::json run_line(const RunInfo& run);
// {"type":"step", ...} for `step`; non-finite doubles become null.
nlohmann::json step_line(const StepMetrics& step);

// {"type":"eval", ...} for `eval`.
nlohmann::json eval_line(const EvalMetrics& eval);
// {"type":"save", ...} for `save`.
nlohmann::json save_line(const SaveMetrics& save);

// The run line's fields; the error (kCorrupt) names the field and what it should be, without the
// file and line, which the caller adds.
Result<RunInfo> parse_run_line(const nlohmann::json& line);
// A step line's fields; null doubles read as NaN. Errors as parse_run_line.
Result<StepMetrics> parse_step_line(const nlohmann::json& line);
// An eval line's fields. Errors as parse_run_line.
Result<EvalMetrics> parse_eval_line(const nlohmann::json& line);
// A save line's fields. Errors as parse_run_line.
Result<SaveMetrics> parse_save_line(const nlohmann::json& line);

}  // namespace tierzero::report::internal
