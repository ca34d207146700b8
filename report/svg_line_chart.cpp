// A line chart: numeric x, one path per series, gaps where a value is missing.
#include <algorithm>
#include <cmath>
#include <limits>

#include "report/internal/svg_chart.h"
#include "report/internal/svg_frame.h"

namespace tierzero::report::internal {

namespace {

bool usable(double v, Scale scale) { return std::isfinite(v) && (scale == Scale::kLinear || v > 0); }

struct Extent {
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  void add(double v) {
    min = std::min(min, v);
    max = std::max(max, v);
  }
};

}  // namespace

std::string render_line_chart(const LineChart& chart) {
  std::vector<LegendEntry> legend;
  Extent xs, ys;
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const LineSeries& s = chart.series[i];
    legend.push_back({s.name, s.color >= 0 ? s.color : static_cast<int>(i), s.dashed, false});
    for (size_t k = 0; k < std::min(s.x.size(), s.y.size()); ++k) {
      if (!usable(s.x[k], chart.x.scale) || !usable(s.y[k], chart.y.scale)) continue;
      xs.add(s.x[k]);
      ys.add(s.y[k]);
    }
  }
  SvgFrame frame(legend);
  frame.set_x(chart.x, xs.min, xs.max);
  frame.set_y(chart.y, ys.min, ys.max);
  std::string svg = frame.open("line", chart.title, chart.note, chart.series.size());
  svg += frame.y_axis(chart.y);
  svg += frame.x_axis(chart.x);
  for (size_t i = 0; i < chart.series.size(); ++i) {
    const LineSeries& s = chart.series[i];
    const char* color = series_color(legend[i].color);
    std::string d, dots;
    Extent sy;
    size_t points = 0;
    bool pen_down = false;
    for (size_t k = 0; k < std::min(s.x.size(), s.y.size()); ++k) {
      if (!usable(s.x[k], chart.x.scale) || !usable(s.y[k], chart.y.scale)) {
        pen_down = false;
        continue;
      }
      const std::string x = px_text(frame.px(s.x[k])), y = px_text(frame.py(s.y[k]));
      d += (pen_down ? " L" : (d.empty() ? "M" : " M")) + x + " " + y;
      pen_down = true;
      ++points;
      sy.add(s.y[k]);
      if (chart.markers) {
        dots += "<circle cx=\"" + x + "\" cy=\"" + y + "\" r=\"3.5\" fill=\"" + color + "\"><title>" +
                escape_xml(s.name + ": " + chart.x.label + " " + format_tick(s.x[k], 0) + ", " + chart.y.label + " " +
                           format_tick(s.y[k], 0)) +
                "</title></circle>";
      }
    }
    svg += "<path class=\"series\" data-name=\"" + escape_xml(s.name) + "\" data-points=\"" + std::to_string(points) +
           "\"";
    if (points > 0) svg += " data-y-min=\"" + value_text(sy.min) + "\" data-y-max=\"" + value_text(sy.max) + "\"";
    svg += " fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\"" +
           (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + " d=\"" + (d.empty() ? "M0 0" : d) + "\"/>\n";
    if (!dots.empty()) svg += "<g class=\"markers\">" + dots + "</g>\n";
  }
  if (xs.min > xs.max) {
    svg += "<text class=\"empty\" x=\"" + px_text((frame.plot_left() + frame.plot_right()) / 2) + "\" y=\"" +
           px_text((frame.plot_top() + frame.plot_bottom()) / 2) + "\" text-anchor=\"middle\">no data</text>\n";
  }
  return svg + frame.legend_and_close();
}

}  // namespace tierzero::report::internal
