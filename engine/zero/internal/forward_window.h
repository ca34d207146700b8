// The forward's shape (zero_engine.h): a step's micro-batches one after the other, or all of them
// unit by unit both ways (window_pass.h). The window may run at all at stage 3 (per-unit gathers)
// with the optimizer step followed into the forward or the parameters offloaded; it runs when its
// kept tensors, beside the device gradient accumulator, fit the GPU's room (engine/layout's GpuRoom,
// which the planner decides with too), and always without a GPU. Decided once, as soon as the
// window's size is known.
#pragma once

#include <cstdint>
#include <string>

#include "engine/layout/layout.h"
#include "engine/model/functional_model.h"

namespace tierzero::engine {

class ForwardWindow {
 public:
  // For `model` (outlives this) in `compute_dtype`; `possible`: the window may run at all;
  // `accumulator_bytes`: the device gradient accumulator (0: none); `room`: the GPU's, which
  // `budget_text` names for the choice's sentence; `group`: micro-batches the window runs as one batch
  // through each body unit (ZeroEngineOptions::window_group) and `kept`: decoder layers whose graphs it
  // keeps (ZeroEngineOptions::kept_layers), both named in the sentence.
  ForwardWindow(const FunctionalModel& model, at::ScalarType compute_dtype, bool possible, uint64_t accumulator_bytes,
                state_layout::GpuRoom room, std::string budget_text, int64_t group, int64_t kept);

  // Whether windows of `micro_batches` micro-batches of `tokens` tokens each run unit by unit:
  // false when the window cannot run or there is one micro-batch; else decides once, at the first
  // call (or decide()), for every later window.
  bool unit_by_unit(int64_t micro_batches, int64_t tokens);
  // Decides before the first window, when the window may run.
  void decide(int64_t micro_batches, int64_t tokens);
  // The decision and why: "unit by unit across 4 micro-batches (...)" or "micro-batch by micro-batch
  // (...)"; empty when the window cannot run or has not been decided yet.
  const std::string& choice() const { return choice_; }

 private:
  const FunctionalModel& model_;
  at::ScalarType compute_dtype_;
  bool possible_;
  uint64_t accumulator_bytes_;
  state_layout::GpuRoom room_;
  std::string budget_text_;
  int64_t group_;
  int64_t kept_;
  bool unit_by_unit_ = false;
  std::string choice_;
};

}  // namespace tierzero::engine
