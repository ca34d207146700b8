// Charts of training runs: loss, throughput, memory per tier, step-time breakdown, bandwidth.
#include <algorithm>
#include <cmath>

#include "report/internal/plots.h"

namespace tierzero::report::internal {

namespace {

constexpr size_t kMarkersUpTo = 60;  // points per series above which curves have no dots
// The loss axis spans at least 10 % of the loss: a run whose loss stays flat to 0.1 % shows a flat
// line, not that noise stretched over the whole chart.
constexpr double kLossMinRelativeSpan = 0.1;

template <typename Field>
LineChart per_run_chart(const std::vector<RunMetrics>& runs, std::string title, std::string y_label, bool include_zero,
                        Field field) {
  LineChart chart;
  chart.title = std::move(title);
  chart.x = {"step"};
  chart.y = {std::move(y_label), Scale::kLinear, include_zero};
  for (size_t i = 0; i < runs.size(); ++i) {
    LineSeries s{runs[i].run.name, {}, {}, false, static_cast<int>(i)};
    for (const StepMetrics& step : runs[i].steps) {
      s.x.push_back(static_cast<double>(step.step));
      s.y.push_back(field(step));
    }
    chart.markers = chart.markers && s.x.size() <= kMarkersUpTo;
    chart.series.push_back(std::move(s));
  }
  return chart;
}

}  // namespace

LineChart loss_chart(const std::vector<RunMetrics>& runs) {
  LineChart c = per_run_chart(runs, "Training loss", "loss", false, [](const StepMetrics& s) { return s.loss; });
  c.note = runs.size() > 1 ? "every run overlaid; a gap is a step whose loss was not finite (skipped)" : "";
  bool evaluated = false;
  for (size_t i = 0; i < runs.size(); ++i) {  // the held-out loss beside each run's training loss, dashed
    if (runs[i].evals.empty()) continue;
    LineSeries s{runs[i].run.name + " (eval)", {}, {}, true, static_cast<int>(i)};
    for (const EvalMetrics& e : runs[i].evals) {
      s.x.push_back(static_cast<double>(e.step));
      s.y.push_back(e.loss);
    }
    c.series.push_back(std::move(s));
    evaluated = true;
  }
  if (evaluated) {
    c.title = "Training and eval loss";
    c.note += std::string(c.note.empty() ? "" : "; ") +
              "dashed: the loss on the held-out data, the mean over its target tokens";
  }
  c.y.min_relative_span = kLossMinRelativeSpan;
  return c;
}

LineChart learning_rate_chart(const std::vector<RunMetrics>& runs) {
  LineChart c = per_run_chart(runs, "Learning rate", "lr", true, [](const StepMetrics& s) { return s.lr; });
  c.note = "the scheduler's value at each step";
  return c;
}

LineChart grad_norm_chart(const std::vector<RunMetrics>& runs) {
  LineChart c =
      per_run_chart(runs, "Gradient norm", "grad norm", true, [](const StepMetrics& s) { return s.grad_norm; });
  c.note = "the global L2 norm of the unscaled gradient; a gap is a step whose norm was not finite (skipped)";
  return c;
}

LineChart throughput_chart(const std::vector<RunMetrics>& runs) {
  return per_run_chart(runs, "Throughput", "tokens/s", true, [](const StepMetrics& s) { return s.tokens_per_s; });
}

LineChart memory_chart(const RunMetrics& run) {
  struct Tier {
    const char* name;
    int64_t StepMetrics::*bytes;
  };
  static const Tier kTiers[] = {{"GPU peak allocated", &StepMetrics::gpu_peak_bytes},
                                {"GPU reserved", &StepMetrics::gpu_reserved_bytes},
                                {"pinned host", &StepMetrics::pinned_bytes},
                                {"pageable host", &StepMetrics::pageable_bytes},
                                {"NVMe", &StepMetrics::nvme_bytes}};
  int64_t largest = 0;
  for (const StepMetrics& s : run.steps) {
    for (const Tier& t : kTiers) largest = std::max(largest, s.*t.bytes);
  }
  const bool gib = largest >= (int64_t{1} << 30);
  const double unit = gib ? 1073741824.0 : 1048576.0;
  LineChart chart;
  chart.title = "Memory per tier: " + run.run.name;
  chart.x = {"step"};
  chart.y = {gib ? "GiB" : "MiB", Scale::kLinear, true};
  chart.markers = run.steps.size() <= kMarkersUpTo;
  for (size_t t = 0; t < std::size(kTiers); ++t) {
    LineSeries s{kTiers[t].name, {}, {}, false, static_cast<int>(t)};
    bool held = false;  // a tier that held nothing (no GPU on a CPU run, no NVMe) is left out
    for (const StepMetrics& step : run.steps) {
      s.x.push_back(static_cast<double>(step.step));
      s.y.push_back(static_cast<double>(step.*kTiers[t].bytes) / unit);
      held = held || step.*kTiers[t].bytes > 0;
    }
    if (held) chart.series.push_back(std::move(s));
  }
  return chart;
}

BarChart breakdown_chart(const RunMetrics& run) {
  struct Phase {
    const char* name;
    double StepBreakdown::*seconds;
  };
  static const Phase kPhases[] = {
      {"forward", &StepBreakdown::forward_s},     {"backward", &StepBreakdown::backward_s},
      {"grad D2H", &StepBreakdown::grad_d2h_s},   {"CPU optimizer", &StepBreakdown::cpu_optimizer_s},
      {"param H2D", &StepBreakdown::param_h2d_s}, {"communication", &StepBreakdown::comm_s},
      {"GPU idle", &StepBreakdown::gpu_idle_s}};
  std::vector<const StepMetrics*> steps;
  for (const StepMetrics& s : run.steps) {
    if (s.breakdown) steps.push_back(&s);
  }
  BarChart chart;
  chart.title = "Step time breakdown: " + run.run.name;
  chart.x_label = "step";
  chart.y = {"seconds per step"};
  chart.stacked = true;
  if (steps.empty()) return chart;
  const size_t group = (steps.size() + kMaxBreakdownBars - 1) / kMaxBreakdownBars;
  if (group > 1) chart.note = "each bar: the mean of " + std::to_string(group) + " consecutive steps";
  for (size_t p = 0; p < std::size(kPhases); ++p) chart.series.push_back({kPhases[p].name, {}, static_cast<int>(p)});
  for (size_t first = 0; first < steps.size(); first += group) {
    const size_t last = std::min(steps.size(), first + group);
    chart.categories.push_back(last - first == 1
                                   ? std::to_string(steps[first]->step)
                                   : std::to_string(steps[first]->step) + "-" + std::to_string(steps[last - 1]->step));
    for (size_t p = 0; p < std::size(kPhases); ++p) {
      double sum = 0;
      for (size_t i = first; i < last; ++i) sum += (*steps[i]->breakdown).*kPhases[p].seconds;
      chart.series[p].values.push_back(sum / static_cast<double>(last - first));
    }
  }
  return chart;
}

LineChart bandwidth_chart(const RunMetrics& run) {
  struct Link {
    const char* name;
    std::optional<double> StepMetrics::*gbps;
  };
  static const Link kLinks[] = {{"H2D (pinned -> GPU)", &StepMetrics::h2d_gbps},
                                {"D2H (GPU -> pinned)", &StepMetrics::d2h_gbps},
                                {"NVMe read", &StepMetrics::nvme_read_gbps},
                                {"NVMe write", &StepMetrics::nvme_write_gbps}};
  LineChart chart;
  chart.title = "Transfer bandwidth: " + run.run.name;
  chart.x = {"step"};
  chart.y = {"GB/s", Scale::kLinear, true};
  chart.markers = run.steps.size() <= kMarkersUpTo;
  for (size_t l = 0; l < std::size(kLinks); ++l) {
    LineSeries s{kLinks[l].name, {}, {}, false, static_cast<int>(l)};
    bool measured = false;
    for (const StepMetrics& step : run.steps) {
      const std::optional<double>& v = step.*kLinks[l].gbps;
      s.x.push_back(static_cast<double>(step.step));
      s.y.push_back(v ? *v : NAN);
      measured = measured || v.has_value();
    }
    if (measured) chart.series.push_back(std::move(s));
  }
  return chart;
}

}  // namespace tierzero::report::internal
