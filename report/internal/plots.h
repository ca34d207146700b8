// The charts of a report page, built from runs and bench files (rendered by svg_chart.h).
#pragma once

#include <string>
#include <vector>

#include "report/internal/svg_chart.h"
#include "report/report.h"

namespace tierzero::report::internal {

// Bars of a breakdown chart at most; longer runs are averaged over groups of steps.
inline constexpr size_t kMaxBreakdownBars = 40;

// Loss against step, one series per run (run i in colour i); the axis spans at least 10 % of
// the loss, so a flat run is drawn flat.
LineChart loss_chart(const std::vector<RunMetrics>& runs);
// Learning rate against step, one series per run (the axis reaches 0).
LineChart learning_rate_chart(const std::vector<RunMetrics>& runs);
// Gradient norm against step, one series per run (the axis reaches 0).
LineChart grad_norm_chart(const std::vector<RunMetrics>& runs);
// Tokens/s against step, one series per run.
LineChart throughput_chart(const std::vector<RunMetrics>& runs);
// Bytes held in each tier against step for one run: one series per tier that holds bytes at
// some step (GPU peak always).
LineChart memory_chart(const RunMetrics& run);
// The step time split into phases, one stacked bar per step or group of steps (at most
// kMaxBreakdownBars); empty categories when the run has no breakdown.
BarChart breakdown_chart(const RunMetrics& run);
// Measured transfer bandwidths against step; no series when the run measured none.
LineChart bandwidth_chart(const RunMetrics& run);

// bench io: for each direction, GB/s against block size (at the queue depth of that direction's
// best point) and GB/s against queue depth (at its block size); one series per backend and
// thread count, plus fio's as dashed lines where measured.
std::vector<LineChart> io_charts(const BenchFile& bench);
// bench adam: Gparam/s against threads (tierzero, and the torch peer dashed) and GB/s against
// threads (with STREAM copy, triad and the roofline pass).
std::vector<LineChart> adam_charts(const BenchFile& bench);
// bench tiers: GB/s of every stream beside the bandwidth it is measured against.
BarChart tiers_chart(const BenchFile& bench);

}  // namespace tierzero::report::internal
