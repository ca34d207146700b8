// Reading `tierzero bench io|adam|tiers --json` files (common/internal/bench_report.h writes them:
// {title, version, cpu, params, columns, rows: [{column: value}], summary, ok}).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "report/report.h"

namespace tierzero::report {

namespace {

using nlohmann::json;

// "line L, column C" of byte `offset` in `text`.
std::string line_and_column(const std::string& text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// "256K", "1M", "4096" (bench io's short_size) in bytes; 0 when it is none of those.
uint64_t parse_block(const std::string& text) {
  size_t used = 0;
  uint64_t n = 0;
  try {
    n = std::stoull(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const std::string suffix = text.substr(used);
  if (suffix.empty()) return n;
  if (suffix == "K") return n << 10;
  if (suffix == "M") return n << 20;
  if (suffix == "G") return n << 30;
  return 0;
}

// Reads the cells of one row; the first failure is kept, with the row's index.
class RowReader {
 public:
  RowReader(const json& row, size_t index) : row_(row), index_(index) {}

  std::string text(const char* column) {
    const json* v = find(column);
    if (v == nullptr) return {};
    if (!v->is_string()) return fail(column, "a string"), std::string();
    return v->get<std::string>();
  }
  int64_t integer(const char* column) {
    const json* v = find(column);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) return fail(column, "an integer"), 0;
    return v->get<int64_t>();
  }
  // A number; null (the benchmark printed n/a) reads as NaN.
  double number(const char* column) {
    const json* v = find(column);
    if (v == nullptr) return NAN;
    if (v->is_null()) return NAN;
    if (!v->is_number()) return fail(column, "a number"), NAN;
    return v->get<double>();
  }
  // Absent, or null, or a number.
  std::optional<double> optional_number(const char* column) {
    if (!row_.contains(column) || row_[column].is_null()) return std::nullopt;
    const double v = number(column);
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
  }
  void fail_with(const std::string& message) {
    if (status_.ok()) status_ = corrupt("rows[" + std::to_string(index_) + "]: " + message);
  }
  const Status& status() const { return status_; }

 private:
  const json* find(const char* column) {
    if (!status_.ok()) return nullptr;
    if (!row_.contains(column)) {
      fail_with(std::string("column '") + column + "' is missing");
      return nullptr;
    }
    return &row_[column];
  }
  void fail(const char* column, const char* expected) {
    fail_with(std::string("column '") + column + "' is " + row_[column].type_name() + "; expected " + expected);
  }

  const json& row_;
  size_t index_;
  Status status_;
};

Status read_io_row(RowReader& r, BenchFile& out) {
  IoPoint p;
  p.op = r.text("op");
  p.backend = r.text("backend");
  const std::string block = r.text("block");
  p.depth = r.integer("depth");
  p.threads = r.integer("threads");
  p.gbps = r.number("GB/s");
  p.fio_gbps = r.optional_number("fio_GB/s");
  if (r.status().ok() && (p.block_bytes = parse_block(block)) == 0) {
    r.fail_with("block '" + block + "' is not a size like 256K, 1M or 4096");
  }
  if (r.status().ok() && p.op != "read" && p.op != "write") r.fail_with("op '" + p.op + "' is not read or write");
  out.io.push_back(p);
  return r.status();
}

Status read_adam_row(RowReader& r, BenchFile& out) {
  AdamPoint p;
  p.threads = r.integer("threads");
  p.gparams = r.number("Gparam/s");
  p.gbps = r.number("GB/s");
  p.torch_gparams = r.optional_number("torch_Gp/s");
  p.torch_gbps = r.optional_number("torch_GB/s");
  p.copy_gbps = r.optional_number("copy_GB/s");
  p.triad_gbps = r.optional_number("triad_GB/s");
  p.roof_gbps = r.optional_number("roof_GB/s");
  out.adam.push_back(p);
  return r.status();
}

Status read_tiers_row(RowReader& r, BenchFile& out) {
  TiersRow row;
  row.what = r.text("what");
  row.gbps = r.number("GB/s");
  row.peer_gbps = r.number("peer_GB/s");
  out.tiers.push_back(row);
  return r.status();
}

}  // namespace

Result<BenchFile> read_bench_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return not_found("bench file " + path + " does not exist: pass a file written by `tierzero bench ... --json FILE`");
  }
  std::ifstream in(path);
  if (!in) return io_error("cannot open bench file " + path + ": check its permissions");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return corrupt(path + ": not JSON at " + line_and_column(text, e.byte > 0 ? e.byte - 1 : 0) +
                   ": pass a file written by `tierzero bench io|adam|tiers --json FILE`");
  } catch (const json::exception& e) {  // out_of_range: a number such as 5e999
    return corrupt(path + ": not JSON (" + e.what() +
                   "): pass a file written by `tierzero bench io|adam|tiers --json FILE`");
  }
  if (!j.is_object() || !j.contains("title") || !j["title"].is_string()) {
    return corrupt(path + ": no \"title\" string; not a `tierzero bench ... --json` file");
  }
  BenchFile out;
  out.path = path;
  out.title = j["title"].get<std::string>();
  if (out.title == "tierzero bench io") {
    out.kind = BenchKind::kIo;
  } else if (out.title == "tierzero bench adam") {
    out.kind = BenchKind::kAdam;
  } else if (out.title == "tierzero bench tiers") {
    out.kind = BenchKind::kTiers;
  } else {
    return unsupported(path + ": a bench JSON of an unknown kind, \"" + out.title +
                       "\"; tierzero report plots tierzero bench io, bench adam and bench tiers");
  }
  if (j.contains("cpu") && j["cpu"].is_string()) out.cpu = j["cpu"].get<std::string>();
  if (j.contains("params") && j["params"].is_object()) {
    for (const auto& [key, value] : j["params"].items()) {
      out.params.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  if (!j.contains("rows") || !j["rows"].is_array()) return corrupt(path + ": no \"rows\" array (" + out.title + ")");
  for (size_t i = 0; i < j["rows"].size(); ++i) {
    const json& row = j["rows"][i];
    if (!row.is_object()) return corrupt(path + ": rows[" + std::to_string(i) + "] is not an object");
    RowReader r(row, i);
    Status s = out.kind == BenchKind::kIo     ? read_io_row(r, out)
               : out.kind == BenchKind::kAdam ? read_adam_row(r, out)
                                              : read_tiers_row(r, out);
    if (!s.ok()) return s.with_context(path + " (" + out.title + ")");
  }
  return out;
}

}  // namespace tierzero::report
