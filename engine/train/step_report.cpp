#include "engine/train/internal/step_report.h"

#include <fmt/format.h>

#include "common/common.h"
#include "engine/train/internal/epochs.h"

namespace tierzero::engine::trainer {

bool should_print(int64_t step, int64_t first_step, int64_t last_step, int64_t every) {
  return step == first_step + 1 || step == last_step || (every > 0 && step % every == 0);
}

std::string bytes_text(int64_t bytes) { return bytes < 0 ? "-" : format_bytes(static_cast<uint64_t>(bytes)); }

std::string format_step_line(const StepRecord& r) {
  std::string line = fmt::format(
      "step {:5}/{}  loss {:.4f}  lr {:.3e}  grad-norm {:.3f}  {:8.0f} tok/s  {:.4f} TFLOPS  gpu-peak {}  "
      "gpu-reserved {}  pinned {}  pageable {}  nvme {}  {:.2f}s  epoch {:.2f}",
      r.step, r.steps, r.loss, r.lr, r.grad_norm, r.tokens_per_s, r.tflops, bytes_text(r.memory.gpu_peak_bytes),
      bytes_text(r.memory.gpu_reserved_bytes), bytes_text(r.memory.pinned_bytes), bytes_text(r.memory.pageable_bytes),
      bytes_text(r.memory.nvme_bytes), r.seconds, r.epoch);
  if (r.times) {
    const StepTimes& t = *r.times;
    line += fmt::format(
        "  [time forward {:.3f}s backward {:.3f}s grad-d2h {:.3f}s cpu-optimizer {:.3f}s param-h2d {:.3f}s "
        "comm {:.3f}s gpu-idle {:.3f}s]",
        t.forward_s, t.backward_s, t.grad_d2h_s, t.cpu_optimizer_s, t.param_h2d_s, t.comm_s, t.gpu_idle_s);
    if (t.gpu_optimizer_elements > 0)  // tierzero.gpu_optimizer_share: the GPU's pieces, within cpu-optimizer
      line += fmt::format("  [gpu-optimizer {:.3f}s {:.3g} elements, waited for {:.3f}s]", t.gpu_optimizer_s,
                          static_cast<double>(t.gpu_optimizer_elements), t.gpu_optimizer_wait_s);
  }
  if (r.nvme_io) {
    line += fmt::format("  [nvme-io read {} written {}]", format_bytes(r.nvme_io->step_read_bytes),
                        format_bytes(r.nvme_io->step_written_bytes));
  }
  if (r.overflow) line += "  overflow: step skipped";
  return line;
}

std::string format_done_line(const RunTotals& t) {
  std::string line = fmt::format(
      "done: {} steps ({} skipped) in {:.1f} s | loss {:.4f} -> {:.4f} | {:.0f} tok/s | {:.4f} TFLOPS | "
      "peak gpu {} (reserved {}) | pinned {} | pageable {} | nvme {}",
      t.steps, t.skipped_steps, t.seconds, t.first_loss, t.last_loss, t.tokens_per_s, t.tflops,
      bytes_text(t.peak.gpu_peak_bytes), bytes_text(t.peak.gpu_reserved_bytes), bytes_text(t.peak.pinned_bytes),
      bytes_text(t.peak.pageable_bytes), bytes_text(t.peak.nvme_bytes));
  if (t.eval_loss) line += fmt::format(" | eval loss {:.4f}", *t.eval_loss);
  line += fmt::format(" | epoch {:.2f}: {}", t.epochs, times_seen(t.epochs));
  if (!t.saved_to.empty()) line += " | saved to " + t.saved_to;
  if (!t.exported_to.empty()) line += " | exported to " + t.exported_to;
  return line;
}

}  // namespace tierzero::engine::trainer
