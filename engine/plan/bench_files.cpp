// Machine figures from `tierzero bench pcie|io|adam|tiers --json` files (common/internal/bench_report.h:
// {title, params, columns, rows: [{column: value}], summary, ok}).
#include <fstream>
#include <sstream>

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

// Raises `figure` to `value` when higher (or unset from a file yet), recording `source`.
void take_best(MachineFigure& figure, double value, const std::string& source) {
  if (figure.source.rfind("bench", 0) != 0 || value > figure.value) figure = {value, source};
}

Status apply_pcie(const json& rows, const json& params, const std::string& path, Machine& m) {
  for (size_t i = 0; i < rows.size(); ++i) {
    if (text_at(rows[i], "host") != "pinned") continue;
    const std::string dir = text_at(rows[i], "dir");
    if (dir != "h2d" && dir != "d2h") continue;
    TZ_ASSIGN_OR_RETURN(double gbps, number_at(rows[i], i, "tierzero_GB/s", path));
    take_best(dir == "h2d" ? m.h2d_gbps : m.d2h_gbps, gbps, "bench pcie " + path);
  }
  if (!rows.empty() && params.contains("device") && params["device"].is_string())
    m.gpu_name = params["device"].get<std::string>();
  return {};
}

// The read and write rows. The mixed and pipe/ rows (bench io --mixed, --pipeline) are left out:
// the step's NVMe time is its reads at the read rate plus its writes at the write rate
// (time_terms.cpp says why).
Status apply_io(const json& rows, const std::string& path, Machine& m) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string op = text_at(rows[i], "op");
    if (op != "read" && op != "write") continue;
    TZ_ASSIGN_OR_RETURN(double gbps, number_at(rows[i], i, "GB/s", path));
    MachineFigure& figure = op == "read" ? m.nvme_read_gbps : m.nvme_write_gbps;
    if (figure.source.rfind("bench tiers", 0) == 0) continue;  // tiers measured the training path
    take_best(figure, gbps, "bench io " + path);
  }
  return {};
}

Status apply_adam(const json& rows, const std::string& path, Machine& m) {
  for (size_t i = 0; i < rows.size(); ++i) {
    TZ_ASSIGN_OR_RETURN(double gbps, number_at(rows[i], i, "GB/s", path));
    take_best(m.adam_gbps, gbps, "bench adam " + path);
  }
  return {};
}

// tierzero's own streams: "nvme -> gpu (tierzero)" / "nvme -> pinned (tz)" and the reverse.
Status apply_tiers(const json& rows, const std::string& path, Machine& m) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string what = text_at(rows[i], "what");
    if (what.find("(raw)") != std::string::npos) continue;
    const bool read = what.rfind("nvme ->", 0) == 0;
    const bool write = what.find("-> nvme") != std::string::npos;
    if (!read && !write) continue;
    TZ_ASSIGN_OR_RETURN(double gbps, number_at(rows[i], i, "GB/s", path));
    MachineFigure& figure = read ? m.nvme_read_gbps : m.nvme_write_gbps;
    if (figure.source.rfind("bench tiers", 0) != 0) figure = {};  // replaces bench io's figure
    take_best(figure, gbps, "bench tiers " + path);
  }
  return {};
}

}  // namespace

Status apply_bench_file(const std::string& path, Machine& machine) {
  std::ifstream in(path);
  if (!in)
    return not_found(path + ": cannot open the bench JSON file (write one with `tierzero bench ... --json FILE`)");
  std::stringstream text;
  text << in.rdbuf();
  const json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return invalid_argument(path + ": not JSON; expected a `tierzero bench --json` file");
  const std::string title = j.contains("title") && j["title"].is_string() ? j["title"].get<std::string>() : "";
  const json rows = j.contains("rows") && j["rows"].is_array() ? j["rows"] : json::array();
  const json params = j.contains("params") && j["params"].is_object() ? j["params"] : json::object();
  if (title == "tierzero bench pcie") return apply_pcie(rows, params, path, machine);
  if (title == "tierzero bench io") return apply_io(rows, path, machine);
  if (title == "tierzero bench adam") return apply_adam(rows, path, machine);
  if (title == "tierzero bench tiers") return apply_tiers(rows, path, machine);
  return invalid_argument(path + ": title \"" + title +
                          "\" is not tierzero bench pcie, io, adam or tiers; pass those files to --bench-json");
}

}  // namespace tierzero::engine
