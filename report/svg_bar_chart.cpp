// A bar chart: one slot per category, series stacked in it or side by side.
#include <algorithm>
#include <cmath>

#include "report/internal/svg_chart.h"
#include "report/internal/svg_frame.h"

namespace tierzero::report::internal {

namespace {

double value_at(const BarSeries& s, size_t category) {
  const double v = category < s.values.size() ? s.values[category] : NAN;
  return std::isfinite(v) ? v : 0;
}

}  // namespace

std::string render_bar_chart(const BarChart& chart) {
  std::vector<LegendEntry> legend;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const BarSeries& s = chart.series[i];
    legend.push_back({s.name, s.color >= 0 ? s.color : static_cast<int>(i), false, true});
  }
  double min = 0, max = 0;
  for (size_t c = 0; c < chart.categories.size(); ++c) {
    double above = 0, below = 0;
    for (const BarSeries& s : chart.series) {
      const double v = value_at(s, c);
      if (chart.stacked) {
        (v >= 0 ? above : below) += v;
      } else {
        above = std::max(above, v);
        below = std::min(below, v);
      }
    }
    max = std::max(max, above);
    min = std::min(min, below);
  }
  Axis y = chart.y;
  y.include_zero = true;
  y.scale = Scale::kLinear;
  SvgFrame frame(legend, chart.categories);
  frame.set_x({}, 0, static_cast<double>(std::max<size_t>(1, chart.categories.size())));
  frame.set_y(y, min, max);
  std::string svg = frame.open(chart.stacked ? "stacked-bars" : "bars", chart.title, chart.note, chart.series.size());
  svg += frame.y_axis(y);
  const double slot =
      (frame.plot_right() - frame.plot_left()) / static_cast<double>(std::max<size_t>(1, chart.categories.size()));
  const double bar_width =
      slot * 0.78 / (chart.stacked ? 1.0 : static_cast<double>(std::max<size_t>(1, chart.series.size())));
  std::vector<double> top(chart.categories.size(), 0), bottom(chart.categories.size(), 0);
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const BarSeries& s = chart.series[i];
    std::string rects;
    size_t bars = 0;
    for (size_t c = 0; c < chart.categories.size(); ++c) {
      const double v = value_at(s, c);
      double lo = 0, hi = v;
      if (chart.stacked) {
        double& base = v >= 0 ? top[c] : bottom[c];
        lo = base;
        hi = base + v;
        base = hi;
      }
      const double x = frame.plot_left() + slot * static_cast<double>(c) + slot * 0.11 +
                       (chart.stacked ? 0 : bar_width * static_cast<double>(i));
      const double y0 = frame.py(std::max(lo, hi)), y1 = frame.py(std::min(lo, hi));
      ++bars;
      rects += "<rect x=\"" + px_text(x) + "\" y=\"" + px_text(y0) + "\" width=\"" + px_text(bar_width) +
               "\" height=\"" + px_text(std::max(0.0, y1 - y0)) + "\" data-value=\"" + value_text(v) + "\"><title>" +
               escape_xml(chart.categories[c] + ": " + s.name + " " + format_tick(v, 0)) + "</title></rect>";
    }
    svg += "<g class=\"series\" data-name=\"" + escape_xml(s.name) + "\" data-bars=\"" + std::to_string(bars) +
           "\" fill=\"" + series_color(legend[i].color) + "\">" + rects + "</g>\n";
  }
  svg += frame.x_categories(chart.categories, chart.x_label);
  return svg + frame.legend_and_close();
}

}  // namespace tierzero::report::internal
