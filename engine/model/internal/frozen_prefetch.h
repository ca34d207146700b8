// Private to engine/model: the frozen base units of a LoraModel kept on a CUDA device between uses,
// the next one copied ahead on a side stream while the current one computes.
//
// Units are asked for in runs (the window runs every micro-batch through one unit; the micro-batch
// path asks for each unit once per pass) and in order: ascending in the forward, descending in the
// backward. The cache holds the unit in use and one copied ahead in the direction the requests last
// moved, turning at either end of the model (the head is followed by the unit before it, unit 0 by
// unit 1). A unit asked for twice in a row is not copied again, nor is the unit just left when it
// is the next one (the turn at either end).
//
// Stream safety: each copy's device memory is allocated on the current (compute) stream, so
// LibTorch's allocator reuses it in that stream's order; the side stream waits for the compute
// stream's position before it writes, and the compute stream waits for the copy's event before it
// reads or before an unused copy is dropped.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace tierzero::engine {

class FrozenPrefetch {
 public:
  // `host_unit(u)`: unit u's weights in host memory (pinned for the copy to overlap), in the model's
  // order; `num_units` units; copies go to `device` (CUDA).
  FrozenPrefetch(std::function<const std::vector<const at::Tensor*>&(size_t)> host_unit, size_t num_units,
                 at::Device device);
  ~FrozenPrefetch();

  // Unit u's weights on the device, ready for work queued on the device's current stream from now
  // on; starts the copy of the unit expected next. Thread-safe.
  std::vector<at::Tensor> unit(size_t u);
  // The device the copies go to.
  at::Device device() const { return device_; }

 private:
  struct Copy {
    size_t unit = 0;
    std::vector<at::Tensor> weights;
    std::unique_ptr<c10::Event> done;  // recorded on the side stream after the copy; null: copied on the current stream
  };
  Copy copy_now(size_t u) const;
  Copy copy_ahead(size_t u) const;
  // Orders the current stream after `copy` (no host wait).
  void order_after(const Copy& copy) const;

  std::function<const std::vector<const at::Tensor*>&(size_t)> host_unit_;
  size_t num_units_;
  at::Device device_;
  c10::Stream side_;
  std::mutex mu_;
  std::optional<Copy> current_;
  std::optional<Copy> ahead_;
};

}  // namespace tierzero::engine
