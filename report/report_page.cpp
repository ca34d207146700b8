// render_report_html: the runs' section, then one section per bench file.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/common.h"
#include "common/version.h"
#include "report/internal/html_page.h"
#include "report/internal/plots.h"
#include "report/report.h"

namespace tierzero::report {

namespace {

using namespace internal;

std::string figure(const std::string& svg) { return "<figure>\n" + svg + "</figure>\n"; }

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// The median of `field` over the run's steps, or NaN.
template <typename Field>
double median_of(const RunMetrics& run, Field field) {
  std::vector<double> v;
  for (const StepMetrics& s : run.steps) {
    if (std::isfinite(field(s))) v.push_back(field(s));
  }
  if (v.empty()) return NAN;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

std::string runs_table(const std::vector<RunMetrics>& runs) {
  std::vector<std::vector<std::string>> rows;
  for (const RunMetrics& r : runs) {
    const RunInfo& i = r.run;
    int64_t peak_gpu = 0;
    for (const StepMetrics& s : r.steps) peak_gpu = std::max(peak_gpu, s.gpu_peak_bytes);
    const std::string loss =
        r.steps.empty() ? "-" : fixed(r.steps.front().loss, 4) + " -> " + fixed(r.steps.back().loss, 4);
    const std::string eval = r.evals.empty() ? "-"
                                             : fixed(r.evals.back().loss, 4) + " (ppl " +
                                                   fixed(r.evals.back().perplexity, 2) + ", step " +
                                                   std::to_string(r.evals.back().step) + ")";
    rows.push_back({i.name, i.model, i.config.empty() ? "(built-in)" : i.config, std::to_string(i.world_size), i.dtype,
                    std::to_string(i.stage), i.offload, std::to_string(r.steps.size()), loss, eval,
                    fixed(median_of(r, [](const StepMetrics& s) { return s.tokens_per_s; }), 0),
                    fixed(median_of(r, [](const StepMetrics& s) { return s.tflops; }), 3),
                    fixed(median_of(r, [](const StepMetrics& s) { return s.step_time_s; }), 3),
                    peak_gpu > 0 ? format_bytes(static_cast<uint64_t>(peak_gpu)) : "-"});  // "-": no GPU
  }
  return html_table({"run", "model", "config", "ranks", "dtype", "stage", "offload", "steps", "loss first -> last", "eval loss (last)",
                     "tokens/s (median)", "TFLOPS (median)", "s/step (median)", "peak GPU"},
                    rows, "runs");
}

std::string runs_section(const std::vector<RunMetrics>& runs) {
  std::string s = "<h2>Training runs</h2>\n";
  for (const RunMetrics& r : runs) s += "<p class=\"source\">" + escape_xml(r.run.name + ": " + r.path) + "</p>\n";
  s += runs_table(runs);
  s += figure(render_line_chart(loss_chart(runs)));
  s += figure(render_line_chart(learning_rate_chart(runs)));
  s += figure(render_line_chart(grad_norm_chart(runs)));
  s += figure(render_line_chart(throughput_chart(runs)));
  for (const RunMetrics& r : runs) {
    s += "<h3>" + escape_xml(r.run.name) + "</h3>\n";
    s += figure(render_line_chart(memory_chart(r)));
    const BarChart breakdown = breakdown_chart(r);
    if (!breakdown.categories.empty()) s += figure(render_bar_chart(breakdown));
    const LineChart bandwidth = bandwidth_chart(r);
    if (!bandwidth.series.empty()) s += figure(render_line_chart(bandwidth));
  }
  return s;
}

std::string bench_section(const BenchFile& bench) {
  std::string s = "<h3>" + escape_xml(bench.title) + "</h3>\n<p class=\"source\">" +
                  escape_xml(bench.path + (bench.cpu.empty() ? "" : "; CPU: " + bench.cpu)) + "</p>\n";
  switch (bench.kind) {
    case BenchKind::kIo:
      for (const LineChart& c : io_charts(bench)) s += figure(render_line_chart(c));
      break;
    case BenchKind::kAdam:
      for (const LineChart& c : adam_charts(bench)) s += figure(render_line_chart(c));
      break;
    case BenchKind::kTiers: s += figure(render_bar_chart(tiers_chart(bench))); break;
  }
  return s + html_details("parameters of this run", bench.params);
}

}  // namespace

std::string render_report_html(const ReportInput& input) {
  std::string subtitle = "tierzero " + std::string(kTierzeroVersion) + ": ";
  subtitle += std::to_string(input.runs.size()) + (input.runs.size() == 1 ? " training run, " : " training runs, ");
  subtitle +=
      std::to_string(input.benches.size()) + (input.benches.size() == 1 ? " benchmark file" : " benchmark files");
  std::string page = page_begin(input.title, subtitle);
  if (!input.runs.empty()) page += runs_section(input.runs);
  if (!input.benches.empty()) {
    page += "<h2>Benchmarks</h2>\n";
    for (const BenchFile& b : input.benches) page += bench_section(b);
  }
  return page + page_end();
}

}  // namespace tierzero::report
