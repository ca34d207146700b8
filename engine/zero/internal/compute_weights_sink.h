// Where an offloaded optimizer sends the new compute weights when the compute partition is neither
// on the device nor in host memory (ZeRO-3 parameters homed on NVMe, nvme_params.h): the optimizer
// writes each stepped range into a host window the sink lends, then sends it home. The send is a
// PartitionWrite, so readers of the partition order after it exactly as after a device copy.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "engine/zero/internal/offload_stack.h"

namespace tierzero::engine {

class ComputeWeightsSink {
 public:
  virtual ~ComputeWeightsSink() = default;

  // The compute dtype of the windows (bf16 / fp16, or fp32).
  virtual at::ScalarType dtype() const = 0;
  // A host window (contiguous, dtype()) for the new weights of elements [begin, begin + count) of
  // the partition, a range inside one of the optimizer's sub-groups (sub_group_size, at most the
  // partition: a window's size); blocks until the window's last send has completed.
  // Valid until send(begin, count).
  virtual at::Tensor lend(int64_t begin, int64_t count) = 0;
  // The window lent for [begin, begin + count) holds the final values: queues them home and returns
  // the write, whose CopyDone completes once a read of those elements sees them (its wait throws
  // tierzero::Error with the write's error).
  virtual PartitionWrite send(int64_t begin, int64_t count) = 0;
};

}  // namespace tierzero::engine
