// The estimate command's text: '#' header, items table, tier checks, time terms, verdict.
#include "common/common.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine {
namespace {

std::string line(const char* format, auto... args) { return plan::printed(format, args...) + "\n"; }

}  // namespace

std::string format_plan(const Plan& p, const std::vector<std::string>& header) {
  std::string out = "# tierzero estimate\n";
  for (const std::string& h : header) out += "# " + h + "\n";
  out += line("# run: %.4g params, stage %d, %d rank(s), %s, optimizer %s (state %s), params %s", double(p.parameters),
              p.stage, p.world_size, p.precision.c_str(), p.optimizer_device.c_str(), p.optimizer_state.c_str(),
              p.param_device.c_str());
  out += line("# batch: micro %lld x seq %lld x accumulation %lld = %lld tokens per step per rank",
              (long long)p.micro_batch, (long long)p.seq_len, (long long)p.gradient_accumulation_steps,
              (long long)p.tokens_per_step);
  if (p.optimizer_device != "none")
    out += line("# state layout: master %s, m + v %s, host gradients %s%s", p.master_weights.c_str(),
                p.optimizer_state.c_str(), p.offload_grad_dtype.c_str(),
                p.optimizer_records > 0 ? (", optimizer records in memory " + std::to_string(p.optimizer_records_in_memory) +
                                           " of " + std::to_string(p.optimizer_records))
                                              .c_str()
                                        : "");
  out += "#\n" + line("%-16s %8s %8s %8s %8s %8s   (bytes per parameter of this rank's partition)", "state", "gpu",
                      "pinned", "pageable", "nvme", "total");
  for (const StateBytes& r : p.state_bytes)
    out += line("%-16s %8.3f %8.3f %8.3f %8.3f %8.3f", r.what.c_str(), r.gpu, r.pinned, r.pageable, r.nvme, r.total());
  out += "#\n" + line("%-9s %-48s %-9s %12s  %s", "tier", "what", "when", "bytes", "formula");
  for (const MemoryItem& i : p.items)
    out += line("%-9s %-48s %-9s %12s  %s", tier_name(i.tier), i.what.c_str(), phase_name(i.phase),
                format_bytes(i.bytes).c_str(), i.formula.c_str());
  out += "#\n" + line("%-14s %12s %12s  %-5s %s", "check", "peak", "budget", "ok", "budget from");
  for (const TierCheck& c : p.checks)
    out += line("%-14s %12s %12s  %-5s %s", c.name.c_str(), format_bytes(c.peak_bytes).c_str(),
                c.budget_bytes ? format_bytes(c.budget_bytes).c_str() : "-",
                c.budget_bytes == 0 ? "-"
                : c.over()          ? "OVER"
                                    : "OK",
                c.budget_source.c_str());
  out += "#\n" + line("%-12s %10s  %s", "time term", "seconds", "detail");
  for (const TimeTerm& t : p.time_terms) out += line("%-12s %10.3f  %s", t.what.c_str(), t.seconds, t.detail.c_str());
  out += "#\n";
  for (const std::string& n : p.notes) out += "# note: " + n + "\n";
  out +=
      line("# gpu peak allocated (what train's gpu-peak shows): %s", format_bytes(p.gpu_allocated_peak_bytes).c_str());
  out += line(
      "# predicted step: %.3f s (bottleneck: %s; overlap model: every resource busy at once, the step the "
      "slowest, the backward after a followed optimizer step; no overlap: %.3f s), %.0f tokens/s per rank",
      p.step_seconds, p.bottleneck.c_str(), p.serial_step_seconds,
      p.step_seconds > 0 ? double(p.tokens_per_step) / p.step_seconds : 0.0);
  for (const std::string& problem : p.problems) out += "# OVER: " + problem + "\n";
  out += p.feasible() ? "# Result: OK (fits every budget given)\n" : "# Result: FAIL (a budget cannot be met)\n";
  return out;
}

}  // namespace tierzero::engine
