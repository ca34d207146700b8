// Reads back the charts of a report page without a browser: the <svg class="chart"> elements,
// their data attributes, series and tick values (what svg_chart.h promises to emit).
#pragma once

#include <string>
#include <vector>

namespace tierzero::report::testing {

struct ProbedSeries {
  std::string name;
  int points = 0;  // line series: data-points
  int bars = 0;    // bar series: data-bars
  std::vector<double> bar_values;
};

struct ProbedChart {
  std::string title, kind;
  int series_attribute = 0;  // data-series of the <svg>
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
  std::vector<ProbedSeries> series;  // <path class="series"> and <g class="series">, in order
  std::vector<double> x_ticks, y_ticks;
  std::vector<std::string> x_tick_labels, y_tick_labels;
};

// Every chart of `html`, in page order.
std::vector<ProbedChart> probe_charts(const std::string& html);
// The first chart whose title starts with `prefix`; fails the current test (and returns a dummy)
// when none does.
const ProbedChart& chart_titled(const std::vector<ProbedChart>& charts, const std::string& prefix);

}  // namespace tierzero::report::testing
