#include "engine/zero/internal/forward_window.h"

#include <utility>

#include "engine/zero/internal/window_pass.h"

namespace tierzero::engine {

ForwardWindow::ForwardWindow(const FunctionalModel& model, at::ScalarType compute_dtype, bool possible,
                             uint64_t accumulator_bytes, state_layout::GpuRoom room, std::string budget_text,
                             int64_t group, int64_t kept)
    : model_(model),
      compute_dtype_(compute_dtype),
      possible_(possible),
      accumulator_bytes_(accumulator_bytes),
      room_(room),
      budget_text_(std::move(budget_text)),
      group_(group),
      kept_(kept) {}

bool ForwardWindow::unit_by_unit(int64_t micro_batches, int64_t tokens) {
  if (!possible_ || micro_batches < 2) return false;
  if (choice_.empty()) decide(micro_batches, tokens);
  return unit_by_unit_;
}

void ForwardWindow::decide(int64_t micro_batches, int64_t tokens) {
  if (!possible_) return;
  // The window (window_pass.h) keeps, for every micro-batch but one, the input of each unit but the
  // last and an output gradient (hidden states in the compute dtype), and one unit's gradients
  // summed in fp32.
  const uint64_t extra = window_pass_extra_bytes(model_, micro_batches, tokens, compute_dtype_);
  const std::string grouped =
      group_ > 1 && micro_batches % group_ == 0
          ? ", decoder layers " + std::to_string(group_) + " micro-batches at a time (tierzero.window_group)"
          : "";
  const std::string kept =
      kept_ > 0 ? ", the last " + std::to_string(kept_) + " decoder layers not recomputed (tierzero.kept_activations)"
                : "";
  const std::string unit_by_unit = "unit by unit across " + std::to_string(micro_batches) + " micro-batches" + grouped +
                                   kept +
                                   " (+" + format_bytes(extra) +
                                   " of kept unit inputs, output gradients and one unit's fp32 gradient sums";
  if (micro_batches < 2) {
    unit_by_unit_ = false;
    choice_ = "micro-batch by micro-batch (one micro-batch per step)";
    return;
  }
  if (!room_.on_gpu) {
    unit_by_unit_ = true;
    choice_ = unit_by_unit + " in host memory)";
    return;
  }
  unit_by_unit_ = room_.fits(accumulator_bytes_ + extra);
  const std::string why =
      room_.planned_peak > 0
          ? ": planned peak " + format_bytes(room_.planned_peak) + " + accumulator " +
                format_bytes(accumulator_bytes_) + " + window " + (unit_by_unit_ ? "fits " : "exceeds ") +
                budget_text_ + ")"
          : std::string(unit_by_unit_ ? " within" : " past") + " a quarter of " + budget_text_ + "; no planned peak)";
  choice_ =
      unit_by_unit_ ? unit_by_unit + why : "micro-batch by micro-batch (the window's " + format_bytes(extra) + why;
}

}  // namespace tierzero::engine
