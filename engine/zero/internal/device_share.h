// The offloaded optimizer's GPU share (tierzero.gpu_optimizer_share): a share of a step's pieces is
// stepped on the device, with the compact master step of cpu_adam (step_on_gpu: the same bytes as the
// CPU kernel on an FMA target), while cpu_adam steps the others. A device piece's gradient and compact
// state (bf16 weights, int16 residual, the moments and their block scales) are uploaded from its host
// buffers through DeviceQueues (offload/'s DeviceCopies::queue) into device slots, stepped there and downloaded into
// the same host buffers, a chunk of at most engine/layout's gpu_share_chunk elements at a time, the chunks taking the
// queues in turn (one chunk's upload beside another's download). The device buffers are engine/layout's
// (gpu_share_slot), which the planner counts too.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/layout/layout.h"
#include "offload/torch/offload_torch.h"

namespace tierzero::engine {

// The compact master step the device runs on buffers in device memory, queued on `stream` (a
// cudaStream_t, or null on a CPU "device"): cpu_adam::step_on_gpu's signature. Tests of a CPU engine
// give cpu_adam::step_portable behind it.
using DeviceKernel =
    std::function<Status(const cpu_adam::AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                         const cpu_adam::AdamBuffers& device_buffers, void* stream)>;

// Which pieces of a step the device steps for a share `share` (0..<1) of its elements: in the step's
// order, a piece of `counts[i]` elements goes to the device when that keeps the device's elements so
// far nearest share x the elements so far (the device's pieces spread over the pass, so the pieces
// announced in order wait for one at most); only pieces `holdable` marks (their state may stay
// acquired while the next ones step) are candidates.
std::vector<bool> device_pieces(std::span<const int64_t> counts, const std::vector<bool>& holdable, double share);

// Everything queued for one device piece: done once every queue's mark has run.
class DevicePieceDone {
 public:
  explicit DevicePieceDone(std::vector<std::unique_ptr<offload::QueueMark>> marks) : marks_(std::move(marks)) {}
  // Whether the new state is in the host buffers (never blocks).
  bool ran();
  // Blocks until the new state is in the host buffers.
  void wait();

 private:
  std::vector<std::unique_ptr<offload::QueueMark>> marks_;
};

struct DeviceShareSetup {
  double share = 0.0;                       // tierzero.gpu_optimizer_share, in (0, 1)
  offload::DeviceCopies* copies = nullptr;  // the compute device's copies (a CPU "device" in tests)
  state_layout::Layout layout;              // the state's layout (compact master)
  ElementType grads = ElementType::kF32;    // the host gradient partition's element
  int64_t chunk = 0;                        // elements of a slot (state_layout::gpu_share_chunk)
  DeviceKernel kernel;                      // cpu_adam::step_on_gpu, or a test's host kernel
};

class DeviceShare {
 public:
  // Allocates state_layout::kGpuShareQueues slots of `setup.chunk` elements on the device (LibTorch's
  // allocator: under tierzero.gpu_memory_limit) and as many queues. Throws tierzero::Error: CUDA's
  // out-of-memory naming the key and the bytes, kInvalidArgument for a share outside (0, 1), a layout
  // without a compact master, or a chunk that is not a positive multiple of cpu_adam::kMomentBlock.
  explicit DeviceShare(DeviceShareSetup setup);

  double share() const { return setup_.share; }
  // Bytes of device memory the slots hold.
  int64_t device_bytes() const;

  // Queues the step of `host` (a compact master's host buffers as CpuAdam::step takes them: bf16
  // params_16bit, master_residual, moments and their scales, grads of the setup's type; element 0 on a
  // moment block's boundary) on the device: the uploads, the kernel and the downloads into the same
  // host buffers, which must stay valid and untouched until the returned DevicePieceDone ran. Throws
  // tierzero::Error: the kernel's refusal, CUDA's errors.
  DevicePieceDone submit(const cpu_adam::AdamHyperParams& hp, int64_t step_number, float grad_multiplier,
                         const cpu_adam::AdamBuffers& host);

 private:
  DeviceShareSetup setup_;
  state_layout::GpuShareSlot slot_;  // a slot's parts
  std::vector<at::Tensor> slots_;    // device bytes, one per queue
  std::vector<std::unique_ptr<offload::DeviceQueue>> queues_;
  size_t next_ = 0;  // the queue the next chunk takes
};

}  // namespace tierzero::engine
