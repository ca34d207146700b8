// The estimate command's text: '#' header, items table, tier checks, time terms, verdict.
#include <fmt/format.h>

#include <utility>

#include "common/common.h"
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine {
namespace {

template <typename... Args>
std::string line(fmt::format_string<Args...> format, Args&&... args) {
  return fmt::format(format, std::forward<Args>(args)...) + "\n";
}

}  // namespace

std::string format_plan(const Plan& p, const std::vector<std::string>& header) {
  std::string out = "# tierzero estimate\n";
  for (const std::string& h : header) out += "# " + h + "\n";
  out +=
      line("# run: {:.4g} params, stage {}, {} rank(s), {}, optimizer {} (state {}), params {}", double(p.parameters),
           p.stage, p.world_size, p.precision, p.optimizer_device, p.optimizer_state, p.param_device);
  out += line("# batch: micro {} x seq {} x accumulation {} = {} tokens per step per rank", p.micro_batch, p.seq_len,
              p.gradient_accumulation_steps, p.tokens_per_step);
  if (p.optimizer_device != "none")
    out += line("# state layout: master {}, m + v {}, host gradients {}{}", p.master_weights, p.optimizer_state,
                p.offload_grad_dtype,
                p.optimizer_records > 0 ? fmt::format(", optimizer records in memory {} of {}",
                                                      p.optimizer_records_in_memory, p.optimizer_records)
                                        : "");
  out += "#\n" + line("{:<16} {:>8} {:>8} {:>8} {:>8} {:>8}   (bytes per parameter of this rank's partition)", "state",
                      "gpu", "pinned", "pageable", "nvme", "total");
  for (const StateBytes& r : p.state_bytes)
    out +=
        line("{:<16} {:8.3f} {:8.3f} {:8.3f} {:8.3f} {:8.3f}", r.what, r.gpu, r.pinned, r.pageable, r.nvme, r.total());
  out += "#\n" + line("{:<9} {:<48} {:<9} {:>12}  {}", "tier", "what", "when", "bytes", "formula");
  for (const MemoryItem& i : p.items)
    out += line("{:<9} {:<48} {:<9} {:>12}  {}", tier_name(i.tier), i.what, phase_name(i.phase), format_bytes(i.bytes),
                i.formula);
  out += "#\n" + line("{:<14} {:>12} {:>12}  {:<5} {}", "check", "peak", "budget", "ok", "budget from");
  for (const TierCheck& c : p.checks)
    out += line("{:<14} {:>12} {:>12}  {:<5} {}", c.name, format_bytes(c.peak_bytes),
                c.budget_bytes ? format_bytes(c.budget_bytes) : "-",
                c.budget_bytes == 0 ? "-"
                : c.over()          ? "OVER"
                                    : "OK",
                c.budget_source);
  out += "#\n" + line("{:<12} {:>10}  {}", "time term", "seconds", "detail");
  for (const TimeTerm& t : p.time_terms) out += line("{:<12} {:10.3f}  {}", t.what, t.seconds, t.detail);
  out += "#\n";
  for (const std::string& n : p.notes) out += "# note: " + n + "\n";
  out += line("# gpu peak allocated (what train's gpu-peak shows): {}", format_bytes(p.gpu_allocated_peak_bytes));
  out += line(
      "# predicted step: {:.3f} s (bottleneck: {}; overlap model: every resource busy at once, the step the "
      "slowest, the backward after a followed optimizer step; no overlap: {:.3f} s), {:.0f} tokens/s per rank",
      p.step_seconds, p.bottleneck, p.serial_step_seconds,
      p.step_seconds > 0 ? double(p.tokens_per_step) / p.step_seconds : 0.0);
  for (const std::string& problem : p.problems) out += "# OVER: " + problem + "\n";
  out += p.feasible() ? "# Result: OK (fits every budget given)\n" : "# Result: FAIL (a budget cannot be met)\n";
  return out;
}

}  // namespace tierzero::engine
