// The state layout's bytes per parameter in each tier (Plan::state_bytes): the 16-bit weights, the
// master, m + v and the gradients of this rank's partition, where the plan keeps them.
#include "engine/plan/internal/plan_core.h"

namespace tierzero::engine::plan {
namespace {

// `bytes` per element, in memory for `in_memory` of them (a fraction) and on NVMe for the rest.
void split(StateBytes& row, double bytes, double in_memory) {
  row.pinned += bytes * in_memory;
  row.nvme += bytes * (1.0 - in_memory);
}

}  // namespace

std::vector<StateBytes> state_bytes_table(const RunShape& s, const DsConfig& config) {
  const double p = static_cast<double>(std::max<int64_t>(s.partition, 1));
  const double e = s.compute_bytes;
  const ZeroConfig& zero = config.zero;
  StateBytes weights{.what = "16-bit weights"}, master{.what = "master"}, moments{.what = "m, v"},
      grads{.what = "gradients"};
  if (zero.stage < 3) {
    weights.gpu = e * static_cast<double>(s.padded) / p;  // the whole model
  } else if (s.params_nvme) {
    split(weights, e, static_cast<double>(s.params_in_cpu) / p);
  } else if (s.params_cpu) {
    (zero.offload_param.pin_memory ? weights.pinned : weights.pageable) = e;
  } else {
    weights.gpu = e;
  }
  if (!s.optimizer_offloaded) {
    master.gpu = 4;
    moments.gpu = 8;
    grads.gpu = s.grad_bytes;
  } else {
    if (s.weights16_for_device) weights.pinned += 2;  // bound for the GPU
    // Per element of the layout (engine/layout/layout.h): of the whole partition in host memory, or of a
    // record on NVMe, the records in memory a share of them.
    const int64_t g = s.optimizer_nvme ? s.records().group() : std::max<int64_t>(s.partition, 1);
    const int64_t count = s.records().count();
    const double in_memory =
        !s.optimizer_nvme ? 1.0 : (count > 0 ? static_cast<double>(s.records_in_memory) / count : 0.0);
    split(master, static_cast<double>(s.layout.master_bytes(g)) / g, in_memory);
    split(moments, static_cast<double>(s.layout.moment_bytes(g)) / g, in_memory);
    grads.pinned = s.grad_ring_records > 0  // the gradient ring: a few records' worth
                       ? static_cast<double>(s.grad_ring_records * s.records().group() * s.host_grad_bytes) / p
                       : s.host_grad_bytes;
    if (s.device_accumulator) grads.gpu = 4;
  }
  StateBytes sum{.what = "total"};
  for (const StateBytes* r : {&weights, &master, &moments, &grads}) {
    sum.gpu += r->gpu;
    sum.pinned += r->pinned;
    sum.pageable += r->pageable;
    sum.nvme += r->nvme;
  }
  return {weights, master, moments, grads, sum};
}

}  // namespace tierzero::engine::plan
