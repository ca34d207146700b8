// Machine figures from `tierzero bench pcie|io|adam|tiers --json` files (common/internal/bench_report.h:
// {title, params, columns, rows: [{column: value}], summary, ok}).
#include <fstream>
#include <functional>

#include "engine/plan/plan.h"

namespace tierzero::engine {
namespace {

using nlohmann::json;

// The number in column `column` of row `index`; kInvalidArgument names the file, row and column.
Result<double> number_at(const json& row, size_t index, const char* column, const std::string& path) {
  if (!row.is_object() || !row.contains(column) || !row[column].is_number())
    return invalid_argument(path + ": row " + std::to_string(index) + " has no number in column \"" + column +
                            "\"; is it a `tierzero bench` JSON file of this version?");
  return row[column].get<double>();
}

std::string text_at(const json& row, const char* column) {
  return row.is_object() && row.contains(column) && row[column].is_string() ? row[column].get<std::string>() : "";
}

// How far a figure from `source` is trusted: bench tiers' (tierzero's own training path) over the
// other bench files', those over the defaults.
int trust(const std::string& source) {
  return source.rfind("bench tiers", 0) == 0 ? 2 : source.rfind("bench", 0) == 0 ? 1 : 0;
}

// For each row of `rows` that `figure_of(row)` names a figure for (nullptr: a row not priced), the
// number in its `column`, taken into that figure from `source` when more trusted than what it holds,
// or as trusted and higher. kInvalidArgument as number_at.
Status take_rows(const json& rows, const char* column, const std::string& source, const std::string& path,
                 const std::function<MachineFigure*(const json&)>& figure_of) {
  for (size_t i = 0; i < rows.size(); ++i) {
    MachineFigure* figure = figure_of(rows[i]);
    if (figure == nullptr) continue;
    TZ_ASSIGN_OR_RETURN(double value, number_at(rows[i], i, column, path));
    const int held = trust(figure->source), taken = trust(source);
    if (taken > held || (taken == held && value > figure->value)) *figure = {value, source};
  }
  return {};
}

}  // namespace

Status apply_bench_file(const std::string& path, Machine& machine) {
  std::ifstream in(path);
  if (!in)
    return not_found(path + ": cannot open the bench JSON file (write one with `tierzero bench ... --json FILE`)");
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument(path + ": not JSON; expected a `tierzero bench --json` file");
  const std::string title = j.contains("title") && j["title"].is_string() ? j["title"].get<std::string>() : "";
  const json rows = j.contains("rows") && j["rows"].is_array() ? j["rows"] : json::array();
  const json params = j.contains("params") && j["params"].is_object() ? j["params"] : json::object();
  if (title == "tierzero bench pcie") {
    TZ_RETURN_IF_ERROR(take_rows(rows, "tierzero_GB/s", "bench pcie " + path, path, [&](const json& row) {
      const std::string dir = text_at(row, "host") == "pinned" ? text_at(row, "dir") : "";
      return dir == "h2d" ? &machine.h2d_gbps : dir == "d2h" ? &machine.d2h_gbps : nullptr;
    }));
    if (!rows.empty() && params.contains("device") && params["device"].is_string())
      machine.gpu_name = params["device"].get<std::string>();
    return {};
  }
  // io: the read and write rows. The mixed and pipe/ rows (bench io --mixed, --pipeline) are left
  // out: the step's NVMe time is its reads at the read rate plus its writes at the write rate
  // (time_terms.cpp says why).
  if (title == "tierzero bench io")
    return take_rows(rows, "GB/s", "bench io " + path, path, [&](const json& row) {
      const std::string op = text_at(row, "op");
      return op == "read" ? &machine.nvme_read_gbps : op == "write" ? &machine.nvme_write_gbps : nullptr;
    });
  if (title == "tierzero bench adam")
    return take_rows(rows, "GB/s", "bench adam " + path, path, [&](const json&) { return &machine.adam_gbps; });
  // tiers: tierzero's own streams, "nvme -> gpu (tierzero)" / "nvme -> pinned (tz)" and the reverse.
  if (title == "tierzero bench tiers")
    return take_rows(rows, "GB/s", "bench tiers " + path, path, [&](const json& row) -> MachineFigure* {
      const std::string what = text_at(row, "what");
      if (what.find("(raw)") != std::string::npos) return nullptr;
      return what.rfind("nvme ->", 0) == 0               ? &machine.nvme_read_gbps
             : what.find("-> nvme") != std::string::npos ? &machine.nvme_write_gbps
                                                         : nullptr;
    });
  return invalid_argument(path + ": title \"" + title +
                          "\" is not tierzero bench pcie, io, adam or tiers; pass those files to --bench-json");
}

}  // namespace tierzero::engine
