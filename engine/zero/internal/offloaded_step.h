// The offloaded optimizer's one sub-group loop: cpu_adam over the partition a piece at a time,
// wherever the state lives (a StateStore: the records of offload/'s RecordCache in pinned memory or
// on NVMe, record_adam.cpp). Each piece's new compute weights go
// on their way as it finishes (into the host compute partition, to the device on a side stream, or
// through the NVMe parameters' sink), it is announced to the reader following behind, and the
// copies are timed at the step's end. Records in memory and on NVMe give the same weights bit for bit.
// With a GPU share (device_share.h) outside the backward, the pieces it takes are queued on the
// device as they come and finish later, out of order: each is finished (compute weights sent,
// released) once its download has landed, and the pieces are announced in the step's order, a prefix
// at a time.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/partition_optimizer.h"
#include "engine/zero/internal/record_adam.h"
#include "engine/zero/internal/save_progress.h"

namespace tierzero::engine {

// What cpu_adam steps for partition elements [begin, begin + count): the fp32 master, or a compact
// master's int16 residual (its bf16 half is CompactState::hi); the moments and, 8-bit, their scales.
struct StateSpans {
  float* master = nullptr;
  int16_t* residual = nullptr;
  cpu_adam::Elements exp_avg, exp_avg_sq;
  std::span<float> exp_avg_scales, exp_avg_sq_scales;
};

// A piece of the partition one step visits: elements [begin, begin + count); `publish`: announced to
// the step's progress as it finishes (else with the whole partition at the step's end); `holdable`:
// its state may stay acquired while the pieces after it are acquired and released (a GPU share
// steps it meanwhile): state with a home of its own in memory, not a staging buffer the next pieces
// take.
struct StepPiece {
  int64_t begin = 0;
  int64_t count = 0;
  bool publish = true;
  bool holdable = false;
};

// Elements stepped (and published) at a time inside a sub-group whose state is in memory: Adam is
// elementwise, so where a sub-group is cut changes no bit; a finer cut lets the next forward follow
// closer behind. A multiple of cpu_adam::kMomentBlock (8-bit moments' slices start on blocks).
inline constexpr int64_t kPublishSlice = int64_t{1} << 25;

// Where an offloaded optimizer's state lives, as the step visits it.
class StateStore {
 public:
  virtual ~StateStore() = default;
  // The pieces of one step in the order they run; `inside_backward`: in the order the gradients
  // become final in (last to first).
  virtual std::vector<StepPiece> pieces(bool inside_backward) = 0;
  // The state of `piece`, the i-th, ready to step (an NVMe record read). Throws tierzero::Error.
  virtual StateSpans acquire(size_t i, const StepPiece& piece) = 0;
  // `piece`, the i-th, stepped; `reader`: the copy to the device still reading its fp32 master, if any.
  virtual void release(size_t i, const StepPiece& piece, std::shared_ptr<CopyDone> reader) = 0;
  // After the last piece: every write the step queued waited for.
  virtual void finish() = 0;
};

class OffloadedStep {
 public:
  // The loop of the record optimizer set up by `setup` (which outlives it). Throws tierzero::Error
  // (kInvalidArgument) for a sub_group_size below 1.
  explicit OffloadedStep(const RecordAdamSetup& setup) : setup_(setup) {
    if (setup_.sub_group_numel < 1)
      throw Error(invalid_argument("zero_optimization.sub_group_size=" + std::to_string(setup_.sub_group_numel) +
                                   " must be at least 1"));
  }

  // Waits for the last step's copies to the device (their sources are rewritten next) and forgets them.
  void wait_copies();
  // Step number `step` (1 first) over `store`'s pieces (PartitionOptimizer::step's other arguments); call
  // wait_copies() first. `grad`: the engine's contiguous host gradient partition; unused with `grads_final`'s
  // lender (the gradient ring), whose pieces' gradients are given back once stepped. Throws tierzero::Error.
  void run(StateStore& store, int64_t step, const at::Tensor& grad, double grad_multiplier, double lr,
           const at::Tensor& compute_partition, StepProgress* progress, GradsFinal* grads_final);

  // The next run() holds each piece until `save` has read it (PartitionOptimizer::hold_for_save).
  void hold_for_save(std::shared_ptr<SaveProgress> save) { save_ = std::move(save); }
  // Returns once the save being held for (if any) has read elements [0, end).
  void wait_for_save(int64_t end) {
    if (save_ != nullptr) save_->wait_read(end);
  }

  double last_copy_seconds() const { return last_copy_seconds_; }
  const DeviceShareStats& last_device_share() const { return device_stats_; }
  // The last step's copies to the device.
  const std::vector<PartitionWrite>& copies() const { return pending_; }

 private:
  // The buffers cpu_adam (or the GPU share) steps for `piece`, with its gradients `grads`; `window`:
  // the sink's window lent for it, if any.
  cpu_adam::AdamBuffers piece_buffers(const StepPiece& piece, const StateSpans& state,
                                      const cpu_adam::ConstElements& grads, const SixteenBitOutput& out16,
                                      const at::Tensor& window) const;
  // `piece`'s new compute weights on their way (its state stepped); the copy still reading the
  // master, if any.
  std::shared_ptr<CopyDone> send_weights(const StepPiece& piece, const StateSpans& state, const SixteenBitOutput& out16,
                                         const at::Tensor& window, const at::Tensor& compute_partition);

  const RecordAdamSetup& setup_;
  std::vector<PartitionWrite> pending_;  // the last step's copies to the device
  std::shared_ptr<SaveProgress> save_;   // the save in flight the next run() holds for, if any
  double last_copy_seconds_ = 0.0;
  DeviceShareStats device_stats_;
};

}  // namespace tierzero::engine
