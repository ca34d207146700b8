#include "common/internal/bench_report.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/version.h"

namespace tierzero {

BenchReport::BenchReport(std::string title, std::FILE* out) : title_(std::move(title)), out_(out) {}

void BenchReport::param(const std::string& key, const std::string& value) { params_.emplace_back(key, value); }

std::string describe_cpu() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  return model + " x " + std::to_string(std::thread::hardware_concurrency());
}

void BenchReport::begin(std::vector<BenchColumn> columns) {
  columns_ = std::move(columns);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::fprintf(out_, "# %s — tierzero %s\n", title_.c_str(), kTierzeroVersion);
  std::fprintf(out_, "# host: %s, CPU: %s\n", host, describe_cpu().c_str());
  for (auto& [k, v] : params_) std::fprintf(out_, "# %s: %s\n", k.c_str(), v.c_str());
  std::fprintf(out_, "#\n#");
  for (auto& c : columns_) std::fprintf(out_, " %*s", c.width, c.name.c_str());
  std::fprintf(out_, "\n");
  std::fflush(out_);
}

void BenchReport::row(const std::vector<BenchCell>& cells) {
  std::fprintf(out_, " ");
  for (size_t i = 0; i < columns_.size(); ++i) {
    const auto& col = columns_[i];
    const BenchCell cell = i < cells.size() ? cells[i] : BenchCell(std::string("-"));
    if (auto* s = std::get_if<std::string>(&cell)) {
      std::fprintf(out_, " %*s", col.width, s->c_str());
    } else if (auto* n = std::get_if<int64_t>(&cell)) {
      std::fprintf(out_, " %*lld", col.width, static_cast<long long>(*n));
    } else {
      double d = std::get<double>(cell);
      if (std::isfinite(d)) {
        std::fprintf(out_, " %*.*f", col.width, col.precision, d);
      } else {
        std::fprintf(out_, " %*s", col.width, "n/a");
      }
    }
  }
  std::fprintf(out_, "\n");
  std::fflush(out_);
  rows_.push_back(cells);
}

void BenchReport::summary(const std::string& key, const std::string& value) { summary_.emplace_back(key, value); }

void BenchReport::end(bool all_correct) {
  ok_ = all_correct;
  std::fprintf(out_, "#\n");
  for (auto& [k, v] : summary_) std::fprintf(out_, "# %s: %s\n", k.c_str(), v.c_str());
  std::fprintf(out_, "# Result: %s\n", all_correct ? "OK" : "FAIL");
  std::fflush(out_);
}

Status BenchReport::write_json(const std::string& path) const {
  nlohmann::json j;
  j["title"] = title_;
  j["version"] = kTierzeroVersion;
  j["cpu"] = describe_cpu();
  for (auto& [k, v] : params_) j["params"][k] = v;
  for (auto& c : columns_) j["columns"].push_back(c.name);
  j["rows"] = nlohmann::json::array();
  for (const std::vector<BenchCell>& cells : rows_) {
    nlohmann::json row;
    for (size_t i = 0; i < columns_.size(); ++i) {
      const BenchCell cell = i < cells.size() ? cells[i] : BenchCell(std::string("-"));
      nlohmann::json& value = row[columns_[i].name];
      if (auto* s = std::get_if<std::string>(&cell)) {
        value = *s;
      } else if (auto* n = std::get_if<int64_t>(&cell)) {
        value = *n;
      } else if (const double d = std::get<double>(cell); std::isfinite(d)) {
        value = d;
      }  // else null: printed as n/a
    }
    j["rows"].push_back(std::move(row));
  }
  for (auto& [k, v] : summary_) j["summary"][k] = v;
  j["ok"] = ok_;
  std::ofstream out(path);
  out << j.dump(2) << "\n";
  out.close();
  if (!out) return io_error("cannot write benchmark JSON to " + path + ": check the directory exists and is writable");
  return {};
}

}  // namespace tierzero
