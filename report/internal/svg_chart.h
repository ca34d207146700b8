// Charts as inline SVG: line charts (numeric x) and bar charts (categories, stacked or side by
// side), with ticked and labelled axes whose ranges come from the data, one colour per series
// and a legend. The SVG carries what a test needs to check it without a browser: the <svg>
// element has data-x-min/-x-max/-y-min/-y-max (the axis ranges) and data-series (the count);
// each line is one <path class="series" data-name=... data-points=N>, each bar series one
// <g class="series" data-name=... data-bars=N>; ticks are <text class="tick x|y">.
#pragma once

#include <string>
#include <vector>

namespace tierzero::report::internal {

enum class Scale { kLinear, kLog2 };

struct Axis {
  std::string label;
  Scale scale = Scale::kLinear;
  bool include_zero = false;  // linear: the range reaches 0 (throughputs, bytes)
  bool bytes_ticks = false;   // log2: ticks read "256K", "1M" (sizes in bytes)
  double min_relative_span = 0;  // linear: the range spans at least this fraction of the largest |value|,
                                 // so a flat curve is drawn flat rather than its noise magnified (loss)
};

struct LineSeries {
  std::string name;
  std::vector<double> x, y;  // same length; a point whose x or y is not finite is a gap
  bool dashed = false;       // a peer or reference line
  int color = -1;            // palette index; -1: the series' position in the chart
};

struct LineChart {
  std::string title;
  std::string note;  // one line under the title: what the chart holds fixed, where it came from
  Axis x, y;
  std::vector<LineSeries> series;
  bool markers = true;  // a dot (with a tooltip) at every point; off for long curves
};

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; not finite: no bar
  int color = -1;
};

struct BarChart {
  std::string title;
  std::string note;
  std::string x_label;
  Axis y;  // linear; the range always reaches 0
  std::vector<std::string> categories;
  std::vector<BarSeries> series;
  bool stacked = false;  // true: series stacked in each bar; false: side by side
};

// The chart as one <svg> element (no external references).
std::string render_line_chart(const LineChart& chart);
std::string render_bar_chart(const BarChart& chart);

// `text` with &, <, >, " and ' escaped for HTML/SVG text and attribute values.
std::string escape_xml(const std::string& text);

}  // namespace tierzero::report::internal
