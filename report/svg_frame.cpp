#include "report/internal/svg_frame.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tierzero::report::internal {

namespace {

constexpr double kCharWidth = 7.2;  // average width of a 12 px DejaVu Sans character
constexpr double kLegendRow = 20;
constexpr size_t kLegendMaxChars = 44;
constexpr double kLabelAngle = 35;
constexpr double kMinTurnedLabelGap = 24;  // pixels between turned category labels

std::string format(const char* f, double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double to_axis(double v, Scale scale) { return scale == Scale::kLog2 ? std::log2(v) : v; }

std::string shortened(const std::string& name) {
  return name.size() <= kLegendMaxChars ? name : name.substr(0, kLegendMaxChars - 3) + "...";
}

Ticks make_ticks(const Axis& axis, double min, double max) {
  const bool any = std::isfinite(min) && std::isfinite(max);
  if (axis.scale == Scale::kLog2) return any ? log2_ticks(min, max) : log2_ticks(1, 2);
  return any ? linear_ticks(min, max, 6, axis.include_zero, axis.min_relative_span) : linear_ticks(0, 1);
}

std::string tick_label(const Axis& axis, const Ticks& t, double v) {
  if (axis.scale == Scale::kLog2 && axis.bytes_ticks) return format_bytes_tick(v);
  return format_tick(v, t.step);
}

}  // namespace

const char* series_color(int index) {
  static const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                         "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return kPalette[static_cast<size_t>(std::max(0, index)) % 10];
}

std::string px_text(double pixels) {
  std::string s = format("%.2f", pixels);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

std::string value_text(double value) { return format("%.17g", value); }

std::string escape_xml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

SvgFrame::SvgFrame(std::vector<LegendEntry> legend, const std::vector<std::string>& categories)
    : legend_(std::move(legend)) {
  size_t longest = 0;
  for (const LegendEntry& e : legend_) longest = std::max(longest, shortened(e.name).size());
  legend_width_ = std::clamp(longest * kCharWidth + 64, 130.0, 380.0);
  height_ = std::max(height_, top_ + kLegendRow * static_cast<double>(legend_.size()) + bottom_ + 8);
  if (!categories.empty()) {
    size_t label = 0;
    for (const std::string& c : categories) label = std::max(label, c.size());
    const double slot = (plot_right() - plot_left()) / static_cast<double>(categories.size());
    if (label * kCharWidth + 8 > slot) {
      label_angle_ = kLabelAngle;
      label_every_ = static_cast<size_t>(std::ceil(kMinTurnedLabelGap / slot));
      const double extra = label * kCharWidth * std::sin(kLabelAngle * M_PI / 180);
      bottom_ += extra;
      height_ += extra;
    }
  }
}

void SvgFrame::set_x(const Axis& axis, double min, double max) {
  x_scale_ = axis.scale;
  x_ticks_ = make_ticks(axis, min, max);
}

void SvgFrame::set_y(const Axis& axis, double min, double max) {
  y_scale_ = axis.scale;
  y_ticks_ = make_ticks(axis, min, max);
}

double SvgFrame::px(double x) const {
  const double lo = to_axis(x_ticks_.lo, x_scale_), hi = to_axis(x_ticks_.hi, x_scale_);
  return plot_left() + (to_axis(x, x_scale_) - lo) / (hi - lo) * (plot_right() - plot_left());
}

double SvgFrame::py(double y) const {
  const double lo = to_axis(y_ticks_.lo, y_scale_), hi = to_axis(y_ticks_.hi, y_scale_);
  return plot_bottom() - (to_axis(y, y_scale_) - lo) / (hi - lo) * (plot_bottom() - plot_top());
}

std::string SvgFrame::open(const std::string& kind, const std::string& title, const std::string& note,
                           size_t series_count) const {
  std::string s = "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px_text(width_) +
                  "\" height=\"" + px_text(height_) + "\" viewBox=\"0 0 " + px_text(width_) + " " + px_text(height_) +
                  "\" data-kind=\"" + kind + "\" data-title=\"" + escape_xml(title) + "\" data-series=\"" +
                  std::to_string(series_count) + "\" data-x-min=\"" + value_text(x_ticks_.lo) + "\" data-x-max=\"" +
                  value_text(x_ticks_.hi) + "\" data-y-min=\"" + value_text(y_ticks_.lo) + "\" data-y-max=\"" +
                  value_text(y_ticks_.hi) + "\">\n";
  s += "<rect class=\"background\" x=\"0\" y=\"0\" width=\"" + px_text(width_) + "\" height=\"" + px_text(height_) +
       "\" fill=\"#ffffff\"/>\n";
  s += "<text class=\"title\" x=\"" + px_text(plot_left()) + "\" y=\"22\">" + escape_xml(title) + "</text>\n";
  if (!note.empty()) {
    const size_t fits = static_cast<size_t>((width_ - plot_left() - 12) / kCharWidth);
    const std::string shown = note.size() <= fits ? note : note.substr(0, fits - 3) + "...";
    s += "<text class=\"note\" x=\"" + px_text(plot_left()) + "\" y=\"40\"><title>" + escape_xml(note) + "</title>" +
         escape_xml(shown) + "</text>\n";
  }
  return s;
}

std::string SvgFrame::y_axis(const Axis& axis) const {
  std::string s = "<g class=\"axis y\">\n";
  for (double v : y_ticks_.values) {
    const std::string y = px_text(py(v));
    s += "<line class=\"grid\" x1=\"" + px_text(plot_left()) + "\" x2=\"" + px_text(plot_right()) + "\" y1=\"" + y +
         "\" y2=\"" + y + "\"/>\n";
    s += "<text class=\"tick y\" data-value=\"" + value_text(v) + "\" x=\"" + px_text(plot_left() - 8) + "\" y=\"" + y +
         "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + escape_xml(tick_label(axis, y_ticks_, v)) +
         "</text>\n";
  }
  s += "<line class=\"axis-line\" x1=\"" + px_text(plot_left()) + "\" x2=\"" + px_text(plot_left()) + "\" y1=\"" +
       px_text(plot_top()) + "\" y2=\"" + px_text(plot_bottom()) + "\"/>\n";
  const std::string cy = px_text((plot_top() + plot_bottom()) / 2);
  s += "<text class=\"axis-label y\" x=\"18\" y=\"" + cy + "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " + cy +
       ")\">" + escape_xml(axis.label) + "</text>\n</g>\n";
  return s;
}

std::string SvgFrame::x_axis(const Axis& axis) const {
  std::string s = "<g class=\"axis x\">\n";
  s += "<line class=\"axis-line\" x1=\"" + px_text(plot_left()) + "\" x2=\"" + px_text(plot_right()) + "\" y1=\"" +
       px_text(plot_bottom()) + "\" y2=\"" + px_text(plot_bottom()) + "\"/>\n";
  for (double v : x_ticks_.values) {
    const std::string x = px_text(px(v));
    s += "<line class=\"tick-mark\" x1=\"" + x + "\" x2=\"" + x + "\" y1=\"" + px_text(plot_bottom()) + "\" y2=\"" +
         px_text(plot_bottom() + 5) + "\"/>\n";
    s += "<text class=\"tick x\" data-value=\"" + value_text(v) + "\" x=\"" + x + "\" y=\"" +
         px_text(plot_bottom() + 19) + "\" text-anchor=\"middle\">" + escape_xml(tick_label(axis, x_ticks_, v)) +
         "</text>\n";
  }
  s += "<text class=\"axis-label x\" x=\"" + px_text((plot_left() + plot_right()) / 2) + "\" y=\"" +
       px_text(plot_bottom() + 42) + "\" text-anchor=\"middle\">" + escape_xml(axis.label) + "</text>\n</g>\n";
  return s;
}

std::string SvgFrame::x_categories(const std::vector<std::string>& categories, const std::string& label) const {
  std::string s = "<g class=\"axis x\">\n";
  s += "<line class=\"axis-line\" x1=\"" + px_text(plot_left()) + "\" x2=\"" + px_text(plot_right()) + "\" y1=\"" +
       px_text(plot_bottom()) + "\" y2=\"" + px_text(plot_bottom()) + "\"/>\n";
  const double slot = (plot_right() - plot_left()) / static_cast<double>(std::max<size_t>(1, categories.size()));
  for (size_t i = 0; i < categories.size(); i += label_every_) {
    const std::string x = px_text(plot_left() + slot * (static_cast<double>(i) + 0.5));
    const std::string y = px_text(plot_bottom() + 17);
    s += "<text class=\"tick x category\" x=\"" + x + "\" y=\"" + y + "\"";
    if (label_angle_ != 0) {
      s += " text-anchor=\"end\" transform=\"rotate(-" + px_text(label_angle_) + " " + x + " " + y + ")\"";
    } else {
      s += " text-anchor=\"middle\"";
    }
    s += '>';
    s += escape_xml(categories[i]) + "</text>\n";
  }
  s += "<text class=\"axis-label x\" x=\"" + px_text((plot_left() + plot_right()) / 2) + "\" y=\"" +
       px_text(height_ - 10) + "\" text-anchor=\"middle\">" + escape_xml(label) + "</text>\n</g>\n";
  return s;
}

std::string SvgFrame::legend_and_close() const {
  std::string s = "<g class=\"legend\">\n";
  const double x = plot_right() + 18;
  for (size_t i = 0; i < legend_.size(); ++i) {
    const LegendEntry& e = legend_[i];
    const double y = plot_top() + kLegendRow * static_cast<double>(i) + 6;
    const char* color = series_color(e.color);
    s += "<g class=\"legend-item\"><title>" + escape_xml(e.name) + "</title>";
    if (e.box) {
      s += "<rect x=\"" + px_text(x) + "\" y=\"" + px_text(y - 6) + "\" width=\"22\" height=\"12\" fill=\"" + color +
           "\"/>";
    } else {
      s += "<line x1=\"" + px_text(x) + "\" x2=\"" + px_text(x + 22) + "\" y1=\"" + px_text(y) + "\" y2=\"" +
           px_text(y) + "\" stroke=\"" + color + "\" stroke-width=\"2.5\"" +
           (e.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>";
    }
    s += "<text x=\"" + px_text(x + 30) + "\" y=\"" + px_text(y) + "\" dominant-baseline=\"middle\">" +
         escape_xml(shortened(e.name)) + "</text></g>\n";
  }
  return s + "</g>\n</svg>\n";
}

}  // namespace tierzero::report::internal
