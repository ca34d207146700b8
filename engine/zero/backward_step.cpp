#include "engine/zero/internal/backward_step.h"

#include <ATen/record_function.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "engine/zero/internal/partition_layout.h"
#include "engine/zero/internal/traced_thread.h"

namespace tierzero::engine {
namespace {

// For each unit u of `model`: the first element of the suffix of rank 0's partition that is final
// once units u..last have handed over their gradients (no element of it belongs to a parameter
// that a unit below u also uses). Padding counts as final. Throws tierzero::Error when
// `partitioner` does not know a parameter.
std::vector<int64_t> grads_final_from_by_unit(const FunctionalModel& model, const Partitioner& partitioner) {
  // The lowest unit using each parameter: its gradient is final once that unit's backward is done.
  std::map<std::string, size_t> lowest_use;
  std::map<std::string, int64_t> numel;
  for (size_t u = 0; u < model.num_units(); ++u) {
    for (const ParamSpec& spec : model.unit_params(u)) {
      lowest_use.try_emplace(spec.name, u);
      numel[spec.name] = c10::multiply_integers(spec.shape);
    }
  }
  // final_from[u] = the end of the highest run of a parameter some unit below u uses.
  std::vector<int64_t> final_from(model.num_units(), 0);
  for (const auto& [name, unit] : lowest_use) {
    int64_t end = 0;
    for (const PartitionRun& run : partitioner.locate(name, 0, numel[name]))
      if (run.rank == 0) end = std::max(end, run.partition_offset + run.numel);
    for (size_t u = unit + 1; u < final_from.size(); ++u) final_from[u] = std::max(final_from[u], end);
  }
  return final_from;
}

}  // namespace

int64_t grad_ring_records_needed(const FunctionalModel& model, const Partitioner& partitioner, int64_t record_numel) {
  const std::vector<int64_t> final_from = grads_final_from_by_unit(model, partitioner);
  std::set<int64_t> touched;  // records units u..last land on
  int64_t needed = 0;
  for (size_t u = model.num_units(); u-- > 0;) {
    for (const ParamSpec& spec : model.unit_params(u))
      for (const PartitionRun& run : partitioner.locate(spec.name, 0, c10::multiply_integers(spec.shape)))
        if (run.rank == 0 && run.numel > 0)
          for (int64_t r = run.partition_offset / record_numel;
               r <= (run.partition_offset + run.numel - 1) / record_numel; ++r)
            touched.insert(r);
    // Final before unit u's gradients land: [final_from[u + 1], numel); a record is final once all of it is.
    const int64_t final_begin = u + 1 < model.num_units() ? final_from[u + 1] : partitioner.partition_numel();
    const int64_t first_final = (final_begin + record_numel - 1) / record_numel;
    needed = std::max<int64_t>(needed, std::distance(touched.begin(), touched.lower_bound(first_final)));
  }
  return needed;
}

BackwardStep::BackwardStep(const FunctionalModel& model, Partitioner& partitioner, HostGradPipeline& pipeline)
    : partitioner_(partitioner), pipeline_(pipeline), final_from_(grads_final_from_by_unit(model, partitioner)) {}

BackwardStep::~BackwardStep() {
  if (!thread_.joinable()) return;
  grads_final_.fail(internal_error("the optimizer step inside the backward was stopped: the engine is closing"));
  thread_.join();
}

void BackwardStep::start(PartitionOptimizer& optimizer, const at::Tensor& grad, double grad_multiplier, double lr,
                         const at::Tensor& compute_partition) {
  if (thread_.joinable()) throw Error(internal_error("BackwardStep::start: a step is still in flight"));
  grads_final_.start(partitioner_.partition_numel(), pipeline_.lands_in_ring() ? &pipeline_ : nullptr);
  error_ = nullptr;
  thread_ = std::thread([this, &optimizer, grad, grad_multiplier, lr, compute_partition, traced = TracedFrom()] {
    name_this_thread("tz-optimizer");
    const TracedFrom::Scope scope(traced);
    RECORD_USER_SCOPE("tierzero::optimizer_step");
    const auto start = std::chrono::steady_clock::now();
    try {
      optimizer.step(grad, grad_multiplier, lr, compute_partition, nullptr, &grads_final_);
    } catch (...) {
      error_ = std::current_exception();
      if (pipeline_.lands_in_ring()) pipeline_.abandon_ring(error_);  // the backward waits for its slots
    }
    step_seconds_ = seconds_since(start);
  });
}

void BackwardStep::unit_done(size_t unit) {
  partitioner_.hand_over_grads();
  pipeline_.notify_landed([this, from = final_from_.at(unit)] { grads_final_.mark_from(from); });
}

void BackwardStep::abandon(Status error) { grads_final_.fail(std::move(error)); }

double BackwardStep::finish() {
  grads_final_.mark_from(0);
  {
    RECORD_USER_SCOPE("tierzero::join_optimizer");
    thread_.join();
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return step_seconds_;
}

}  // namespace tierzero::engine
