// Private: `train --profile FILE` (step_trace.cpp): LibTorch's profiler (Kineto) around one optimizer
// step, written as a Chrome trace (chrome://tracing, ui.perfetto.dev). It holds the ATen ops of the
// threads LibTorch follows (the training thread and its autograd threads) and, on a GPU, every kernel
// and copy on every stream (CUPTI): the timeline of the compute stream, the copy engines and the host
// that a step's time breakdown sums up.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "common/common.h"

namespace tierzero::engine::trainer {

class StepTrace {
 public:
  // A trace of step `step` (as the step lines number it) into `path` on `device`; nothing starts yet.
  StepTrace(std::string path, int64_t step, at::Device device);
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;
  // Stops a profiler still running (its step failed); writes nothing.
  ~StepTrace();

  // Before step `step` runs: starts the profiler if it is the traced step.
  void before(int64_t step);
  // After step `step` ran: for the traced step, waits for the device's queued work, stops the
  // profiler and writes the trace (kIo naming the file when it cannot be written).
  Status after(int64_t step);

  const std::string& path() const { return path_; }
  int64_t step() const { return step_; }

 private:
  const std::string path_;
  const int64_t step_;
  const at::Device device_;
  bool running_ = false;
};

}  // namespace tierzero::engine::trainer
