// Charts of benchmark files: bench io sweeps, bench adam thread scaling, bench tiers streams.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "report/internal/nice_scale.h"
#include "report/internal/plots.h"

namespace tierzero::report::internal {

namespace {

std::string threads_text(int64_t threads) { return std::to_string(threads) + (threads == 1 ? " thread" : " threads"); }

std::string param(const BenchFile& bench, const std::string& key) {
  for (const auto& [k, v] : bench.params) {
    if (k == key) return v;
  }
  return {};
}

// Adds (x, y) to the series named `name`, creating it (next colour) on first use.
void add_point(std::vector<LineSeries>& series, const std::string& name, bool dashed, double x, double y) {
  auto it = std::find_if(series.begin(), series.end(), [&](const LineSeries& s) { return s.name == name; });
  if (it == series.end()) {
    series.push_back({name, {}, {}, dashed, static_cast<int>(series.size())});
    it = series.end() - 1;
  }
  it->x.push_back(x);
  it->y.push_back(y);
}

// Points of every series in increasing x.
void sort_points(std::vector<LineSeries>& series) {
  for (LineSeries& s : series) {
    std::vector<size_t> order(s.x.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s.x[a] < s.x[b]; });
    LineSeries sorted = s;
    for (size_t i = 0; i < order.size(); ++i) {
      sorted.x[i] = s.x[order[i]];
      sorted.y[i] = s.y[order[i]];
    }
    s = std::move(sorted);
  }
}

// The io points of direction `op` that `keep` selects, as GB/s against `x`: one series per backend
// and thread count, then fio's (dashed) per thread count.
template <typename Keep, typename X>
std::vector<LineSeries> io_series(const BenchFile& bench, const std::string& op, Keep keep, X x) {
  std::vector<LineSeries> ours, fio;
  for (const IoPoint& p : bench.io) {
    if (p.op != op || !keep(p)) continue;
    add_point(ours, p.backend + ", " + threads_text(p.threads), false, x(p), p.gbps);
  }
  std::set<std::pair<int64_t, double>> fio_seen;  // fio ran beside every backend: one value per x
  for (const IoPoint& p : bench.io) {
    if (p.op != op || !keep(p) || !p.fio_gbps || !fio_seen.insert({p.threads, x(p)}).second) continue;
    add_point(fio, "fio (io_uring), " + threads_text(p.threads), true, x(p), *p.fio_gbps);
  }
  for (LineSeries& s : fio) {
    s.color = static_cast<int>(ours.size()) + s.color;
    ours.push_back(std::move(s));
  }
  sort_points(ours);
  return ours;
}

}  // namespace

std::vector<LineChart> io_charts(const BenchFile& bench) {
  std::vector<LineChart> charts;
  for (const std::string op : {"write", "read"}) {
    const IoPoint* best = nullptr;
    for (const IoPoint& p : bench.io) {
      if (p.op == op && std::isfinite(p.gbps) && (best == nullptr || p.gbps > best->gbps)) best = &p;
    }
    if (best == nullptr) continue;
    const uint64_t block = best->block_bytes;
    const int64_t depth = best->depth;
    std::set<uint64_t> blocks;
    std::set<int64_t> depths;
    for (const IoPoint& p : bench.io) {
      if (p.op == op && p.depth == depth) blocks.insert(p.block_bytes);
      if (p.op == op && p.block_bytes == block) depths.insert(p.depth);
    }
    char gbps[32];
    std::snprintf(gbps, sizeof gbps, "%.2f", best->gbps);
    const std::string best_text = "best " + op + " " + gbps + " GB/s (" + best->backend + ", " +
                                  format_bytes_tick(static_cast<double>(block)) + ", depth " + std::to_string(depth) +
                                  ", " + threads_text(best->threads) + ")";
    if (blocks.size() >= 2 || depths.size() < 2) {
      LineChart c;
      c.title = "bench io: " + op + " GB/s against block size";
      c.note = "queue depth " + std::to_string(depth) + "; " + best_text;
      c.x = {"block size", Scale::kLog2, false, true};
      c.y = {"GB/s", Scale::kLinear, true};
      c.series = io_series(
          bench, op, [&](const IoPoint& p) { return p.depth == depth; },
          [](const IoPoint& p) { return static_cast<double>(p.block_bytes); });
      charts.push_back(std::move(c));
    }
    if (depths.size() >= 2) {
      LineChart c;
      c.title = "bench io: " + op + " GB/s against queue depth";
      c.note = "block size " + format_bytes_tick(static_cast<double>(block)) + "; " + best_text;
      c.x = {"queue depth (requests in flight per ring)", Scale::kLog2};
      c.y = {"GB/s", Scale::kLinear, true};
      c.series = io_series(
          bench, op, [&](const IoPoint& p) { return p.block_bytes == block; },
          [](const IoPoint& p) { return static_cast<double>(p.depth); });
      charts.push_back(std::move(c));
    }
  }
  return charts;
}

std::vector<LineChart> adam_charts(const BenchFile& bench) {
  std::vector<AdamPoint> points = bench.adam;
  std::sort(points.begin(), points.end(), [](const AdamPoint& a, const AdamPoint& b) { return a.threads < b.threads; });
  const std::string dtypes = param(bench, "dtypes");
  LineChart rate, bandwidth;
  rate.title = "bench adam: Gparam/s against threads";
  rate.note = dtypes;
  rate.x = {"threads", Scale::kLog2};
  rate.y = {"Gparam/s", Scale::kLinear, true};
  bandwidth.title = "bench adam: memory bandwidth against threads";
  bandwidth.note =
      "tierzero and torch at their own bytes per parameter; STREAM and the roofline pass on the same threads";
  bandwidth.x = rate.x;
  bandwidth.y = {"GB/s", Scale::kLinear, true};
  auto add = [](std::vector<LineSeries>& series, const std::string& name, bool dashed, double x,
                const std::optional<double>& y) {
    if (y) add_point(series, name, dashed, x, *y);
  };
  for (const AdamPoint& p : points) {
    const double t = static_cast<double>(p.threads);
    add(rate.series, "tierzero cpu_adam", false, t, p.gparams);
    add(rate.series, "torch fused AdamW (peer)", true, t, p.torch_gparams);
    add(bandwidth.series, "tierzero cpu_adam", false, t, p.gbps);
    add(bandwidth.series, "torch fused AdamW (peer)", true, t, p.torch_gbps);
    add(bandwidth.series, "STREAM copy", false, t, p.copy_gbps);
    add(bandwidth.series, "STREAM triad", false, t, p.triad_gbps);
    add(bandwidth.series, "roofline pass (the step's memory traffic)", true, t, p.roof_gbps);
  }
  return {rate, bandwidth};
}

BarChart tiers_chart(const BenchFile& bench) {
  BarChart chart;
  chart.title = "bench tiers: streaming GB/s against its peer";
  chart.note = param(bench, "set");
  chart.x_label = "stream";
  chart.y = {"GB/s"};
  chart.series = {{"measured", {}, 0}, {"peer: min(NVMe, PCIe) of the direction", {}, 8}};
  for (const TiersRow& row : bench.tiers) {
    chart.categories.push_back(row.what);
    chart.series[0].values.push_back(row.gbps);
    chart.series[1].values.push_back(row.peer_gbps);
  }
  return chart;
}

}  // namespace tierzero::report::internal
