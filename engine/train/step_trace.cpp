#include "engine/train/internal/step_trace.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <set>
#include <utility>

namespace tierzero::engine::trainer {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;

profiler::ProfilerConfig trace_config() {
  return profiler::ProfilerConfig(torch::profiler::impl::ProfilerState::KINETO, /*report_input_shapes=*/false,
                                  /*profile_memory=*/false, /*with_stack=*/false, /*with_flops=*/false,
                                  /*with_modules=*/false);
}

std::set<ActivityType> activities(at::Device device) {
  std::set<ActivityType> kinds{ActivityType::CPU};
  if (device.is_cuda()) kinds.insert(ActivityType::CUDA);
  return kinds;
}

}  // namespace

StepTrace::StepTrace(std::string path, int64_t step, at::Device device)
    : path_(std::move(path)), step_(step), device_(device) {}

StepTrace::~StepTrace() {
  if (running_) profiler::disableProfiler();
}

void StepTrace::before(int64_t step) {
  if (step != step_) return;
  profiler::prepareProfiler(trace_config(), activities(device_));
  profiler::enableProfiler(trace_config(), activities(device_));
  running_ = true;
}

Status StepTrace::after(int64_t step) {
  if (step != step_ || !running_) return Status();
  if (!device_.is_cpu()) c10::impl::getDeviceGuardImpl(device_.type())->synchronizeDevice(device_.index());
  std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  running_ = false;
  try {
    result->save(path_);
  } catch (const std::exception& e) {
    return io_error("--profile " + path_ + ": the trace of step " + std::to_string(step_) +
                    " could not be written (" + e.what() + "); pass a writable path");
  }
  return Status();
}

}  // namespace tierzero::engine::trainer
