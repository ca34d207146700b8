// What line and bar charts share: the canvas, the plot area, value-to-pixel mapping, the y axis,
// the grid, the title and the legend.
#pragma once

#include <string>
#include <vector>

#include "report/internal/nice_scale.h"
#include "report/internal/svg_chart.h"

namespace tierzero::report::internal {

// The colour of series `index` (a 10-colour palette, repeated).
const char* series_color(int index);

// A number for an SVG coordinate (up to 2 decimals), or a data value written exactly ("%.17g",
// reads back as the same double).
std::string px_text(double pixels);
std::string value_text(double value);

struct LegendEntry {
  std::string name;
  int color = 0;
  bool dashed = false;
  bool box = false;  // a filled square (bars) instead of a line
};

class SvgFrame {
 public:
  // A canvas for `legend` entries; the legend column is as wide as the longest name needs, the
  // canvas tall enough for every entry. With `categories` (a bar chart), room is made under the
  // plot for their labels, turned when they do not fit flat.
  explicit SvgFrame(std::vector<LegendEntry> legend, const std::vector<std::string>& categories = {});

  // Sets the axes' ranges and ticks from the data's extent (finite values only; none: 0..1).
  void set_x(const Axis& axis, double min, double max);
  void set_y(const Axis& axis, double min, double max);

  double plot_left() const { return left_; }
  double plot_right() const { return width_ - legend_width_; }
  double plot_top() const { return top_; }
  double plot_bottom() const { return height_ - bottom_; }
  // Pixel position of a value on each axis.
  double px(double x) const;
  double py(double y) const;

  // <svg ...> with the data attributes, the title and the note.
  std::string open(const std::string& kind, const std::string& title, const std::string& note,
                   size_t series_count) const;
  // Horizontal grid lines, the y axis with its ticks and label.
  std::string y_axis(const Axis& axis) const;
  // The x axis line with numeric ticks and its label.
  std::string x_axis(const Axis& axis) const;
  // The x axis line, a label under each category (turned when they do not fit flat, only every
  // n-th when turned ones would overlap), and the axis label.
  std::string x_categories(const std::vector<std::string>& categories, const std::string& label) const;
  // The legend, right of the plot; then </svg>.
  std::string legend_and_close() const;

 private:
  std::vector<LegendEntry> legend_;
  double width_ = 980, height_ = 380;
  double left_ = 76, top_ = 58, bottom_ = 54, legend_width_ = 0;
  double label_angle_ = 0;  // category labels: degrees turned (0: flat)
  size_t label_every_ = 1;  // category labels: only every n-th, where turned ones would overlap
  Ticks x_ticks_, y_ticks_;
  Scale x_scale_ = Scale::kLinear, y_scale_ = Scale::kLinear;
};

}  // namespace tierzero::report::internal
