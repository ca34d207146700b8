#include "report/internal/html_page.h"

#include <cctype>

#include "report/internal/svg_chart.h"

namespace tierzero::report::internal {

namespace {

constexpr const char* kStyle = R"(
body { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; color: #222; margin: 24px 32px;
       max-width: 1120px; background: #fafafa; }
h1 { font-size: 24px; margin: 0 0 4px 0; }
h2 { font-size: 19px; margin: 32px 0 8px 0; border-bottom: 1px solid #ccc; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 24px 0 4px 0; }
p.sub, p.source { color: #555; margin: 2px 0 10px 0; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 16px 0; background: #fff; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
details { font-size: 13px; margin: 4px 0 16px 0; }
figure { margin: 12px 0; background: #fff; border: 1px solid #e3e3e3; display: inline-block; }
svg.chart text { font-family: "DejaVu Sans", "Helvetica Neue", Arial, sans-serif; font-size: 12px; fill: #333; }
svg.chart text.title { font-size: 15px; font-weight: bold; fill: #111; }
svg.chart text.note { fill: #666; }
svg.chart text.axis-label { font-size: 13px; fill: #222; }
svg.chart text.empty { font-size: 14px; fill: #999; }
svg.chart line.grid { stroke: #e6e6e6; stroke-width: 1; }
svg.chart line.axis-line, svg.chart line.tick-mark { stroke: #555; stroke-width: 1; }
)";

}  // namespace

std::string page_begin(const std::string& title, const std::string& subtitle) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escape_xml(title) +
         "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + escape_xml(title) +
         "</h1>\n<p class=\"sub\">" + escape_xml(subtitle) + "</p>\n";
}

std::string page_end() { return "</body>\n</html>\n"; }

std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::string& css_class) {
  std::string s = "<table class=\"" + escape_xml(css_class) + "\">\n";
  if (!header.empty()) {
    s += "<tr>";
    for (const std::string& h : header) s += "<th>" + escape_xml(h) + "</th>";
    s += "</tr>\n";
  }
  for (const auto& row : rows) {
    s += "<tr>";
    for (const std::string& cell : row) {
      const bool numeric = !cell.empty() && (std::isdigit(static_cast<unsigned char>(cell[0])) || cell[0] == '-');
      s += numeric ? "<td class=\"num\">" : "<td>";
      s += escape_xml(cell) + "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string html_details(const std::string& summary, const std::vector<std::pair<std::string, std::string>>& items) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [k, v] : items) rows.push_back({k, v});
  return "<details><summary>" + escape_xml(summary) + "</summary>\n" + html_table({}, rows, "params") + "</details>\n";
}

}  // namespace tierzero::report::internal
