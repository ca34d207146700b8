// tierzero report/: the `tierzero report` page — training runs (metrics files) and benchmark
// JSON files rendered as one self-contained HTML file with inline SVG charts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/common.h"
#include "report/internal/metrics.h"
#include "report/internal/tensorboard_writer.h"

namespace tierzero::report {

enum class BenchKind : uint8_t { kIo, kAdam, kTiers };

// One row of `bench io` (a sweep point and direction).
struct IoPoint {
  std::string op;       // "read" | "write"
  std::string backend;  // "io_uring", "libaio", "sync", maybe with "/ss" or "/wave"
  uint64_t block_bytes = 0;
  int64_t depth = 0;
  int64_t threads = 0;
  double gbps = 0;
  std::optional<double> fio_gbps;  // --vs-fio
};

// One row of `bench adam` (a thread count). Peer and STREAM figures are absent when not measured.
struct AdamPoint {
  int64_t threads = 0;
  double gparams = 0;
  double gbps = 0;
  std::optional<double> torch_gparams, torch_gbps, copy_gbps, triad_gbps, roof_gbps;
};

// One row of `bench tiers`: a stream and the bandwidth it is measured against.
struct TiersRow {
  std::string what;
  double gbps = 0;
  double peer_gbps = 0;
};

// A `tierzero bench io|adam|tiers --json` file; only the vector of its kind is filled.
struct BenchFile {
  std::string path;
  BenchKind kind = BenchKind::kIo;
  std::string title;  // "tierzero bench io"
  std::string cpu;
  std::vector<std::pair<std::string, std::string>> params;  // the report's '#' header lines
  std::vector<IoPoint> io;
  std::vector<AdamPoint> adam;
  std::vector<TiersRow> tiers;
};

// Reads a benchmark JSON file. Errors (kCorrupt) name the file and what is wrong: not JSON (with
// line and column), a title that is not bench io/adam/tiers, a row without a column its kind
// needs or with a mistyped one (with the row's index); kNotFound / kIo when it cannot be read.
Result<BenchFile> read_bench_file(const std::string& path);

struct ReportInput {
  std::string title = "tierzero report";
  std::vector<RunMetrics> runs;
  std::vector<BenchFile> benches;
};

// The page: a summary table of the runs; loss, learning rate, gradient norm and tokens/s of every
// run overlaid; per run the
// memory held in each tier over the steps, the step-time breakdown as stacked bars (when the
// run has one) and the measured bandwidths (when it has them); per bench file its charts. No
// script, no external reference: the file can be mailed and opened offline.
std::string render_report_html(const ReportInput& input);

}  // namespace tierzero::report
