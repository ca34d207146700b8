// The random numbers a unit's forward drew, drawn again by its recomputation in the backward (as
// torch.utils.checkpoint's preserve_rng_state): a model whose forward is random (LoRA dropout)
// recomputes with the masks its forward used. The engine snapshots the input device's default
// generator before each forward of a unit and replays the snapshot around that unit's recomputation;
// models whose forward_is_random() is false take no snapshot.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <utility>

namespace tierzero::engine {

// The state of one device's default generator at one moment, or nothing.
class RngSnapshot {
 public:
  RngSnapshot() = default;
  // A state taken before (get_state() of `device`'s default generator); undefined: empty.
  RngSnapshot(c10::Device device, at::Tensor state) : device_(device), state_(std::move(state)) {}
  // `device`'s default generator's state now when `random` (model.forward_is_random()), else empty.
  static RngSnapshot capture_if(bool random, c10::Device device);

  bool empty() const { return !state_.defined(); }
  c10::Device device() const { return device_; }
  const at::Tensor& state() const { return state_; }

 private:
  c10::Device device_{c10::kCPU};
  at::Tensor state_;  // the generator's get_state(); undefined: empty
};

// While alive, the snapshot's device generator is in the snapshot's state; the destructor puts back
// the state it had before, so draws after the recomputation continue where they were. Does nothing
// for an empty snapshot.
class RngReplay {
 public:
  explicit RngReplay(const RngSnapshot& snapshot);
  ~RngReplay();
  RngReplay(const RngReplay&) = delete;
  RngReplay& operator=(const RngReplay&) = delete;

 private:
  at::Generator generator_;
  at::Tensor saved_;
};

}  // namespace tierzero::engine
