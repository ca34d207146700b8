// Private to engine/model: the frozen base units of a LoraModel kept on a CUDA device between uses,
// the next one copied ahead (offload/'s DeviceCopies::upload, on its side stream) while the current
// one computes.
//
// Units are asked for in runs (the window runs every micro-batch through one unit; the micro-batch
// path asks for each unit once per pass) and in order: ascending in the forward, descending in the
// backward. The cache holds the unit in use and one copied ahead in the direction the requests last
// moved, turning at either end of the model (the head is followed by the unit before it, unit 0 by
// unit 1). A unit asked for twice in a row is not copied again, nor is the unit just left when it
// is the next one (the turn at either end).
//
// Stream safety is DeviceCopies::upload's: each copy's device memory is allocated on the current
// (compute) stream and not reused before the copy ran, the copy starts after the compute stream's
// position, and the compute stream waits for the copy's event before it reads.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "offload/torch/offload_torch.h"

namespace tierzero::engine {

class FrozenPrefetch {
 public:
  // `host_units[u]`: unit u's weights in host memory (pinned for the copy to overlap), in the model's
  // order, for every unit (`host_units` outlives this); copies go to `device` (CUDA; a CPU "device"
  // copies at once).
  FrozenPrefetch(const std::vector<std::vector<const at::Tensor*>>& host_units, at::Device device);
  ~FrozenPrefetch();

  // Unit u's weights on the device, ready for work queued on the device's current stream from now
  // on; starts the copy of the unit expected next. Thread-safe.
  std::vector<at::Tensor> unit(size_t u);
  // The device the copies go to.
  at::Device device() const { return device_; }

 private:
  struct Copy {
    size_t unit = 0;
    offload::DeviceUpload weights;
  };
  // Queues the copy of unit u.
  Copy copy(size_t u) const;

  const std::vector<std::vector<const at::Tensor*>>& host_units_;
  at::Device device_;
  std::unique_ptr<offload::DeviceCopies> copies_;
  std::mutex mu_;
  std::optional<Copy> current_;
  std::optional<Copy> ahead_;
};

}  // namespace tierzero::engine
