// How every `tierzero bench ...` talks (after nccl-tests): a '#' header with the version, the
// parameters and the machine; a fixed-width table printed row by row as results arrive, with a
// correctness column; a '#' footer with summaries and OK/FAIL; the same data as JSON on request.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <variant>
#include <vector>

#include "common/internal/status.h"

namespace tierzero {

struct BenchColumn {
  std::string name;   // header text and JSON key
  int width = 10;     // characters, right-aligned
  int precision = 2;  // decimals for floating-point cells
};

using BenchCell = std::variant<std::string, int64_t, double>;

class BenchReport {
 public:
  // `title` names the benchmark ("tierzero bench io"); output goes to `out` (stdout by default).
  explicit BenchReport(std::string title, std::FILE* out = stdout);

  // Adds a header line "# key: value" (also stored under "params" in JSON). Call before begin().
  void param(const std::string& key, const std::string& value);
  // Prints the header (title, version, host, CPU, params) and the column titles.
  void begin(std::vector<BenchColumn> columns);
  // Prints one row now; cells match the columns given to begin(). Non-finite doubles print "n/a".
  void row(const std::vector<BenchCell>& cells);
  // Adds a footer line "# key: value" (stored under "summary" in JSON).
  void summary(const std::string& key, const std::string& value);
  // Prints the footer, ending with "# Result: OK" or "# Result: FAIL" from `all_correct`.
  void end(bool all_correct);
  // Writes {title, params, columns, rows:[{col: value}], summary, ok} to `path`.
  Status write_json(const std::string& path) const;

 private:
  std::string title_;
  std::FILE* out_;
  std::vector<std::pair<std::string, std::string>> params_;
  std::vector<std::pair<std::string, std::string>> summary_;
  std::vector<BenchColumn> columns_;
  std::vector<std::vector<BenchCell>> rows_;  // as given to row(); JSON is built by write_json
  bool ok_ = true;
};

// Returns "model name" from /proc/cpuinfo and the online core count, e.g. "Intel Xeon ... x 16".
std::string describe_cpu();

}  // namespace tierzero
