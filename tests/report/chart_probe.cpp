#include "tests/report/chart_probe.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace tierzero::report::testing {

namespace {

std::string attribute(const std::string& tag, const std::string& name) {
  const std::regex re("\\s" + name + "=\"([^\"]*)\"");
  std::smatch m;
  return std::regex_search(tag, m, re) ? m[1].str() : std::string();
}

double number_attribute(const std::string& tag, const std::string& name) {
  const std::string v = attribute(tag, name);
  return v.empty() ? NAN : std::stod(v);
}

std::string unescape(std::string s) {
  const std::pair<const char*, const char*> kEntities[] = {
      {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}};
  for (const auto& [entity, text] : kEntities) {
    for (size_t at = s.find(entity); at != std::string::npos; at = s.find(entity, at + 1)) {
      s.replace(at, std::string(entity).size(), text);
    }
  }
  return s;
}

}  // namespace

std::vector<ProbedChart> probe_charts(const std::string& html) {
  std::vector<ProbedChart> charts;
  const std::regex series_re("<(path|g) class=\"series\"[^>]*>");
  const std::regex rect_re("<rect [^>]*data-value=\"([^\"]*)\"");
  const std::regex tick_re("<text class=\"tick (x|y)\" data-value=\"([^\"]*)\"[^>]*>([^<]*)</text>");
  // Found by hand: libstdc++'s regex recurses once per character of a match, too deep for a chart.
  for (size_t at = html.find("<svg class=\"chart\""); at != std::string::npos;
       at = html.find("<svg class=\"chart\"", at + 1)) {
    const size_t end = html.find("</svg>", at);
    const std::string svg = html.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const std::string open = svg.substr(0, svg.find('>') + 1);
    ProbedChart c;
    c.title = unescape(attribute(open, "data-title"));
    c.kind = attribute(open, "data-kind");
    c.series_attribute = std::stoi(attribute(open, "data-series"));
    c.x_min = number_attribute(open, "data-x-min");
    c.x_max = number_attribute(open, "data-x-max");
    c.y_min = number_attribute(open, "data-y-min");
    c.y_max = number_attribute(open, "data-y-max");
    for (auto s = std::sregex_iterator(svg.begin(), svg.end(), series_re); s != std::sregex_iterator(); ++s) {
      const std::string tag = s->str();
      ProbedSeries ps;
      ps.name = unescape(attribute(tag, "data-name"));
      if ((*s)[1] == "path") {
        ps.points = std::stoi(attribute(tag, "data-points"));
      } else {
        ps.bars = std::stoi(attribute(tag, "data-bars"));
        const size_t end = svg.find("</g>", static_cast<size_t>(s->position()));
        const std::string group =
            svg.substr(static_cast<size_t>(s->position()), end - static_cast<size_t>(s->position()));
        for (auto r = std::sregex_iterator(group.begin(), group.end(), rect_re); r != std::sregex_iterator(); ++r) {
          ps.bar_values.push_back(std::stod((*r)[1].str()));
        }
      }
      c.series.push_back(ps);
    }
    for (auto t = std::sregex_iterator(svg.begin(), svg.end(), tick_re); t != std::sregex_iterator(); ++t) {
      const bool x = (*t)[1] == "x";
      (x ? c.x_ticks : c.y_ticks).push_back(std::stod((*t)[2].str()));
      (x ? c.x_tick_labels : c.y_tick_labels).push_back(unescape((*t)[3].str()));
    }
    charts.push_back(std::move(c));
  }
  return charts;
}

const ProbedChart& chart_titled(const std::vector<ProbedChart>& charts, const std::string& prefix) {
  for (const ProbedChart& c : charts) {
    if (c.title.rfind(prefix, 0) == 0) return c;
  }
  ADD_FAILURE() << "no chart titled '" << prefix << "...' among " << charts.size();
  static const ProbedChart kNone;
  return kNone;
}

}  // namespace tierzero::report::testing
