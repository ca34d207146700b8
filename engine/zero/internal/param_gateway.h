// The seam between a unit's autograd Function and wherever its parameters live: fetch them before
// the unit runs, release them after, and hand over their gradients. The ZeRO partitioners
// implement it (stages 0-2: resident flat buffers; stage 3: all-gathered shards, which
// offload_param keeps in pinned memory or reads from NVMe ahead of use).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

namespace tierzero::engine {

class ParamGateway {
 public:
  virtual ~ParamGateway() = default;

  // Returns unit `unit`'s parameters, whole, in the compute dtype on the compute device, in the
  // model's unit_params(unit) order. Valid until release(unit). May block on a gather.
  virtual std::vector<at::Tensor> fetch(size_t unit) = 0;

  // Ends the use begun by the matching fetch(unit); the tensors it returned may be freed.
  virtual void release(size_t unit) = 0;

  // Takes unit `unit`'s parameter gradients for the current micro-batch (unit_params order, the
  // compute dtype; an undefined tensor means zero) and starts reducing them across ranks. The
  // tensors may be reused by the caller once this returns.
  virtual void reduce_grads(size_t unit, std::vector<at::Tensor> grads) = 0;
};

}  // namespace tierzero::engine
