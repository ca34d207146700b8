// The page around the charts: head and style, headings, tables.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tierzero::report::internal {

// "<!DOCTYPE html>...<body><h1>title</h1>" with the page's style sheet inline.
std::string page_begin(const std::string& title, const std::string& subtitle);
// "</body></html>".
std::string page_end();
// A table, with a header row unless `header` is empty; cells are escaped, numbers right-aligned.
std::string html_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::string& css_class);
// A collapsed <details> block listing key: value pairs.
std::string html_details(const std::string& summary, const std::vector<std::pair<std::string, std::string>>& items);

}  // namespace tierzero::report::internal
