// The report page, read back without a browser: one series per run or sweep line, the points
// and bars the inputs hold, axis ranges that cover the data, no external references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "report/report.h"
#include "tests/report/chart_probe.h"

namespace tierzero::report {
namespace {

using testing::chart_titled;
using testing::probe_charts;
using testing::ProbedChart;

RunMetrics synthetic_run(const std::string& name, int steps, bool breakdown, double loss_scale) {
  RunMetrics r;
  r.path = "/runs/" + name + ".jsonl";
  r.run.name = name;
  r.run.model = "builtin";
  r.run.dtype = "bf16";
  r.run.stage = 3;
  r.run.offload = "optimizer cpu, params cpu";
  for (int i = 1; i <= steps; ++i) {
    StepMetrics s;
    s.step = i;
    s.loss = loss_scale * (2.0 + 8.0 / i);
    s.lr = 1e-4;
    s.tokens_per_s = 1000 + 10 * i;
    s.tflops = 0.5;
    s.step_time_s = 2;
    s.gpu_peak_bytes = (int64_t{2} << 30) + i * (int64_t{1} << 20);
    s.gpu_reserved_bytes = int64_t{3} << 30;
    s.pinned_bytes = int64_t{5} << 30;
    if (breakdown) {
      s.breakdown = StepBreakdown{0.3, 0.6, 0.1, 0.7, 0.1, 0.05, 0.15 + 0.001 * i};
      s.h2d_gbps = 40 + (i % 3);
    }
    r.steps.push_back(s);
  }
  return r;
}

double min_loss(const RunMetrics& r) {
  double m = INFINITY;
  for (const StepMetrics& s : r.steps) m = std::min(m, s.loss);
  return m;
}
double max_loss(const RunMetrics& r) {
  double m = -INFINITY;
  for (const StepMetrics& s : r.steps) m = std::max(m, s.loss);
  return m;
}

// A CPU run holds nothing on a GPU: its memory chart has no GPU series and the table says "-",
// not "0 B" (what the hardware saw, not a zero it never measured).
TEST(ReportHtmlTest, ACpuRunShowsNoGpuTier) {
  ReportInput input;
  input.runs = {synthetic_run("cpu", 10, false, 1.0)};
  for (StepMetrics& s : input.runs[0].steps) {
    s.gpu_peak_bytes = 0;
    s.gpu_reserved_bytes = 0;
    s.pinned_bytes = 0;
    s.pageable_bytes = int64_t{500} << 20;
  }
  const std::string html = render_report_html(input);
  const std::vector<ProbedChart> charts = probe_charts(html);
  const ProbedChart& memory = chart_titled(charts, "Memory per tier: cpu");
  ASSERT_EQ(memory.series.size(), 1u);
  EXPECT_EQ(memory.series[0].name, "pageable host");
  EXPECT_EQ(html.find("0 B</td>"), std::string::npos);
}

// `tierzero report` shows the held-out loss beside the training loss: a dashed series per run that
// evaluated, in the run's colour, and the last evaluation in the runs table.
TEST(ReportHtmlTest, EvalLossBesideTheTrainingLoss) {
  ReportInput input;
  input.runs = {synthetic_run("plain", 10, false, 1.0), synthetic_run("evaluated", 10, false, 1.0)};
  for (int step : {5, 10})
    input.runs[1].evals.push_back(EvalMetrics{.step = step, .loss = 3.5 - 0.1 * step, .perplexity = std::exp(3.5 - 0.1 * step),
                                              .tokens = 640, .samples = 20});
  const std::string html = render_report_html(input);
  const std::vector<ProbedChart> charts = probe_charts(html);
  const ProbedChart& loss = chart_titled(charts, "Training and eval loss");
  ASSERT_EQ(loss.series.size(), 3u);
  EXPECT_EQ(loss.series[2].name, "evaluated (eval)");
  EXPECT_EQ(loss.series[2].points, 2);
  EXPECT_LE(loss.y_min, 2.5);
  EXPECT_NE(html.find("2.5000 (ppl 12.18, step 10)</td>"), std::string::npos);
}

TEST(ReportHtmlTest, RunsOverlaidWithOneSeriesEach) {
  ReportInput input;
  input.runs = {synthetic_run("baseline", 30, false, 1.0), synthetic_run("offload", 200, true, 1.1),
                synthetic_run("short", 5, false, 0.9)};
  const std::string html = render_report_html(input);
  const std::vector<ProbedChart> charts = probe_charts(html);

  const ProbedChart& loss = chart_titled(charts, "Training loss");
  ASSERT_EQ(loss.series.size(), 3u);
  EXPECT_EQ(loss.series_attribute, 3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(loss.series[i].name, input.runs[i].run.name);
    EXPECT_EQ(loss.series[i].points, static_cast<int>(input.runs[i].steps.size()));
    EXPECT_LE(loss.y_min, min_loss(input.runs[i]));
    EXPECT_GE(loss.y_max, max_loss(input.runs[i]));
  }
  EXPECT_LE(loss.x_min, 1);
  EXPECT_GE(loss.x_max, 200);
  EXPECT_GE(loss.y_ticks.size(), 3u);
  EXPECT_DOUBLE_EQ(loss.y_ticks.front(), loss.y_min);

  const ProbedChart& throughput = chart_titled(charts, "Throughput");
  EXPECT_EQ(throughput.series.size(), 3u);
  EXPECT_DOUBLE_EQ(throughput.y_min, 0);
  EXPECT_GE(throughput.y_max, 1000 + 10 * 200);

  // Memory: GPU peak, GPU reserved and pinned hold bytes; pageable and NVMe hold none.
  const ProbedChart& memory = chart_titled(charts, "Memory per tier: offload");
  ASSERT_EQ(memory.series.size(), 3u);
  EXPECT_EQ(memory.series[2].name, "pinned host");
  EXPECT_GE(memory.y_max, 5.0);  // GiB
  EXPECT_DOUBLE_EQ(memory.y_min, 0);

  // Breakdown: 200 steps in at most 40 bars, seven phases stacked.
  const ProbedChart& breakdown = chart_titled(charts, "Step time breakdown: offload");
  EXPECT_EQ(breakdown.kind, "stacked-bars");
  ASSERT_EQ(breakdown.series.size(), 7u);
  for (const auto& s : breakdown.series) EXPECT_EQ(s.bars, 40) << s.name;
  EXPECT_GE(breakdown.y_max, 0.3 + 0.6 + 0.1 + 0.7 + 0.1 + 0.05 + 0.15 + 0.2);
  EXPECT_DOUBLE_EQ(breakdown.series[0].bar_values[0], 0.3);
  EXPECT_EQ(std::count_if(charts.begin(), charts.end(),
                          [](const ProbedChart& c) { return c.title.rfind("Step time breakdown", 0) == 0; }),
            1);  // runs without a breakdown have no such chart

  const ProbedChart& bandwidth = chart_titled(charts, "Transfer bandwidth: offload");
  ASSERT_EQ(bandwidth.series.size(), 1u);
  EXPECT_EQ(bandwidth.series[0].points, 200);
  EXPECT_GE(bandwidth.y_max, 42);
}

// The learning rate and gradient norm of every run, each against the step, on axes from 0.
TEST(ReportHtmlTest, LearningRateAndGradNormOfEveryRun) {
  ReportInput input;
  input.runs = {synthetic_run("warmup", 20, false, 1.0), synthetic_run("other", 10, false, 1.0)};
  for (StepMetrics& s : input.runs[0].steps) {
    s.lr = 3e-4 * std::min<double>(1.0, static_cast<double>(s.step) / 10);
    s.grad_norm = 4.0 / static_cast<double>(s.step);
  }
  input.runs[0].steps[6].grad_norm = NAN;  // a skipped fp16 step: a gap
  const std::vector<ProbedChart> charts = probe_charts(render_report_html(input));

  const ProbedChart& lr = chart_titled(charts, "Learning rate");
  ASSERT_EQ(lr.series.size(), 2u);
  EXPECT_EQ(lr.series[0].name, "warmup");
  EXPECT_EQ(lr.series[0].points, 20);
  EXPECT_DOUBLE_EQ(lr.y_min, 0);
  EXPECT_GE(lr.y_max, 3e-4);
  EXPECT_LT(lr.y_max, 6e-4);  // the axis fits the schedule

  const ProbedChart& grad_norm = chart_titled(charts, "Gradient norm");
  ASSERT_EQ(grad_norm.series.size(), 2u);
  EXPECT_EQ(grad_norm.series[0].points, 19);
  EXPECT_DOUBLE_EQ(grad_norm.y_min, 0);
  EXPECT_GE(grad_norm.y_max, 4.0);
}

// A loss flat to 0.05 % is drawn flat: the axis spans at least 10 % of the loss, not the noise.
TEST(ReportHtmlTest, AFlatLossIsNotZoomedIntoItsNoise) {
  ReportInput input;
  input.runs = {synthetic_run("flat", 50, false, 1.0)};
  for (StepMetrics& s : input.runs[0].steps) s.loss = 2.3 + 0.001 * ((s.step % 3) - 1);
  const ProbedChart& loss = chart_titled(probe_charts(render_report_html(input)), "Training loss");
  EXPECT_GE(loss.y_max - loss.y_min, 0.1 * 2.301);
  EXPECT_LE(loss.y_min, 2.299);
  EXPECT_GE(loss.y_max, 2.301);
  EXPECT_GT(loss.y_min, 1.5);  // still about the data, not from 0
}

TEST(ReportHtmlTest, BreakdownOfAShortRunHasABarPerStep) {
  ReportInput input;
  input.runs = {synthetic_run("few", 7, true, 1.0)};
  const std::vector<ProbedChart> charts = probe_charts(render_report_html(input));
  const ProbedChart& breakdown = chart_titled(charts, "Step time breakdown: few");
  ASSERT_FALSE(breakdown.series.empty());
  EXPECT_EQ(breakdown.series[0].bars, 7);
}

TEST(ReportHtmlTest, PageIsSelfContainedAndEscapesNames) {
  ReportInput input;
  input.title = "runs <of> \"today\"";
  input.runs = {synthetic_run("a<b>&c", 3, false, 1.0)};
  const std::string html = render_report_html(input);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  size_t urls = 0;
  for (size_t at = html.find("http"); at != std::string::npos; at = html.find("http", at + 1)) {
    EXPECT_EQ(html.compare(at, 26, "http://www.w3.org/2000/svg"), 0) << html.substr(at, 60);
    ++urls;
  }
  EXPECT_GT(urls, 0u);
  EXPECT_NE(html.find("a&lt;b&gt;&amp;c"), std::string::npos);
  EXPECT_EQ(html.find("a<b>&c"), std::string::npos);
  EXPECT_NE(html.find("runs &lt;of&gt; &quot;today&quot;"), std::string::npos);
  EXPECT_EQ(chart_titled(probe_charts(html), "Training loss").series[0].name, "a<b>&c");
}

TEST(ReportHtmlTest, AStepWithoutLossIsAGapNotAPoint) {
  RunMetrics r = synthetic_run("gappy", 10, false, 1.0);
  r.steps[4].loss = NAN;
  ReportInput input;
  input.runs = {r};
  const std::vector<ProbedChart> charts = probe_charts(render_report_html(input));
  const ProbedChart& loss = chart_titled(charts, "Training loss");
  ASSERT_EQ(loss.series.size(), 1u);
  EXPECT_EQ(loss.series[0].points, 9);
}

// ---- bench files: real output of `tierzero bench ... --json` (tests/report/data) ----

std::string data_file(const std::string& name) {
  const char* root = std::getenv("TIERZERO_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/report/data/" + name;
}

TEST(ReportHtmlTest, BenchIoSweepHasALinePerBackendAndThreadCount) {
  const BenchFile bench = value_or_throw(read_bench_file(data_file("bench_io_sweep.json")));
  ASSERT_FALSE(bench.io.empty());
  ReportInput input;
  input.benches = {bench};
  const std::vector<ProbedChart> charts = probe_charts(render_report_html(input));
  for (const std::string op : {"write", "read"}) {
    const IoPoint* best = nullptr;
    for (const IoPoint& p : bench.io) {
      if (p.op == op && (best == nullptr || p.gbps > best->gbps)) best = &p;
    }
    ASSERT_NE(best, nullptr);
    // Against block size, at the best point's queue depth: one line per (backend, threads),
    // one point per block size measured there.
    std::map<std::string, int> expected_points;
    double max_gbps = 0, min_block = INFINITY, max_block = 0;
    for (const IoPoint& p : bench.io) {
      if (p.op != op || p.depth != best->depth) continue;
      ++expected_points[p.backend + ", " + std::to_string(p.threads) + (p.threads == 1 ? " thread" : " threads")];
      max_gbps = std::max(max_gbps, p.gbps);
      min_block = std::min(min_block, static_cast<double>(p.block_bytes));
      max_block = std::max(max_block, static_cast<double>(p.block_bytes));
    }
    const ProbedChart& by_block = chart_titled(charts, "bench io: " + op + " GB/s against block size");
    ASSERT_EQ(by_block.series.size(), expected_points.size()) << op;
    for (const auto& s : by_block.series) EXPECT_EQ(s.points, expected_points[s.name]) << op << " " << s.name;
    EXPECT_DOUBLE_EQ(by_block.y_min, 0);
    EXPECT_GE(by_block.y_max, max_gbps);
    EXPECT_LT(by_block.y_max, max_gbps * 2 + 0.5);
    EXPECT_LE(by_block.x_min, min_block);
    EXPECT_GE(by_block.x_max, max_block);
    EXPECT_NE(std::find(by_block.x_tick_labels.begin(), by_block.x_tick_labels.end(), "1M"),
              by_block.x_tick_labels.end());

    std::set<std::string> depth_lines;
    double max_depth = 0;
    for (const IoPoint& p : bench.io) {
      if (p.op != op || p.block_bytes != best->block_bytes) continue;
      depth_lines.insert(p.backend + "/" + std::to_string(p.threads));
      max_depth = std::max(max_depth, static_cast<double>(p.depth));
    }
    const ProbedChart& by_depth = chart_titled(charts, "bench io: " + op + " GB/s against queue depth");
    EXPECT_EQ(by_depth.series.size(), depth_lines.size()) << op;
    EXPECT_GE(by_depth.x_max, max_depth);
    EXPECT_LE(by_depth.x_min, 1);
  }
}

TEST(ReportHtmlTest, BenchAdamHasTierzeroAndThePeerAgainstThreads) {
  const BenchFile bench = value_or_throw(read_bench_file(data_file("bench_adam.json")));
  ASSERT_FALSE(bench.adam.empty());
  ReportInput input;
  input.benches = {bench};
  const std::vector<ProbedChart> charts = probe_charts(render_report_html(input));
  const ProbedChart& rate = chart_titled(charts, "bench adam: Gparam/s against threads");
  ASSERT_EQ(rate.series.size(), 2u);
  EXPECT_EQ(rate.series[0].name, "tierzero cpu_adam");
  EXPECT_EQ(rate.series[1].name, "torch fused AdamW (peer)");
  double max_rate = 0, max_threads = 0;
  for (const AdamPoint& p : bench.adam) {
    max_rate = std::max({max_rate, p.gparams, p.torch_gparams.value_or(0)});
    max_threads = std::max(max_threads, static_cast<double>(p.threads));
  }
  for (const auto& s : rate.series) EXPECT_EQ(s.points, static_cast<int>(bench.adam.size()));
  EXPECT_GE(rate.y_max, max_rate);
  EXPECT_DOUBLE_EQ(rate.y_min, 0);
  EXPECT_LE(rate.x_min, 1);
  EXPECT_GE(rate.x_max, max_threads);
  const ProbedChart& bandwidth = chart_titled(charts, "bench adam: memory bandwidth");
  EXPECT_EQ(bandwidth.series.size(), 5u);  // tierzero, torch, copy, triad, roof
}

TEST(ReportHtmlTest, BenchTiersHasABarPerStream) {
  const BenchFile bench = value_or_throw(read_bench_file(data_file("bench_tiers.json")));
  ASSERT_FALSE(bench.tiers.empty());
  ReportInput input;
  input.benches = {bench};
  const std::vector<ProbedChart> charts = probe_charts(render_report_html(input));
  const ProbedChart& tiers = chart_titled(charts, "bench tiers");
  ASSERT_EQ(tiers.series.size(), 2u);
  double max_gbps = 0;
  for (size_t i = 0; i < bench.tiers.size(); ++i) {
    EXPECT_DOUBLE_EQ(tiers.series[0].bar_values[i], bench.tiers[i].gbps);
    EXPECT_DOUBLE_EQ(tiers.series[1].bar_values[i], bench.tiers[i].peer_gbps);
    max_gbps = std::max({max_gbps, bench.tiers[i].gbps, bench.tiers[i].peer_gbps});
  }
  EXPECT_EQ(tiers.series[0].bars, static_cast<int>(bench.tiers.size()));
  EXPECT_GE(tiers.y_max, max_gbps);
}

}  // namespace
}  // namespace tierzero::report
