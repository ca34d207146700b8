// Adam offloaded to the CPU: state in the engine's pinned host tier, stepped by cpu_adam's fused
// SIMD kernel one sub-group at a time (in slices of at most kPublishSlice elements); each slice's
// new 16-bit weights go back to the device on a side stream while the next one steps, and
// a step with progress announces each finished slice to the reader following behind. With parameters on
// NVMe each slice is stepped into a window of their ComputeWeightsSink and written from there.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "common/common.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/host_elements.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {
namespace {

class CpuOffloadAdam final : public PartitionOptimizer {
 public:
  explicit CpuOffloadAdam(CpuOffloadAdamSetup setup) : setup_(std::move(setup)) {
    state_.master = setup_.master;
    state_.exp_avg = setup_.exp_avg;
    state_.exp_avg_sq = setup_.exp_avg_sq;
    if (setup_.sub_group_numel < 1)
      throw Error(invalid_argument("zero_optimization.sub_group_size=" + std::to_string(setup_.sub_group_numel) +
                                   " must be at least 1"));
  }

  double grad_sq_norm(const at::Tensor& grad) override { return host_grad_sq_norm(*setup_.adam, grad); }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
            StepProgress* progress) override {
    run(grad, grad_multiplier, lr, std::move(compute_partition), progress);
  }

  AdamPartitionState& state() override { return state_; }

  int64_t pinned_bytes() const override {
    if (!state_.master.is_pinned()) return 0;
    return state_.master.nbytes() + state_.exp_avg.nbytes() + state_.exp_avg_sq.nbytes() +
           (setup_.params16.defined() ? setup_.params16.nbytes() : 0);
  }

  double last_copy_seconds() const override { return last_copy_seconds_; }

  std::vector<PartitionWrite> device_writes() const override { return pending_; }

  std::string placement() const override {
    return "cpu (" + cpu_adam::simd_target_name() + ", " + std::to_string(setup_.adam->threads()) + " threads)";
  }

 private:
  // Elements stepped (and published) at a time inside a sub-group: Adam is elementwise, so where a
  // sub-group is cut changes no bit; a finer cut lets the next forward follow closer behind.
  static constexpr int64_t kPublishSlice = int64_t{1} << 25;

  void run(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
           StepProgress* progress) {
    for (PartitionWrite& write : pending_) write.done->wait_host();  // last step's: params16 is rewritten
    pending_.clear();
    const at::Tensor host_grad = grad.is_cpu() && grad.is_contiguous() ? grad : grad.cpu().contiguous();
    const SixteenBitOutput out16 =
        sixteen_bit_output(compute_partition, setup_.params16, state_.master.numel(), "cpu optimizer", setup_.sink);
    const cpu_adam::AdamHyperParams hp = cpu_adam_hyper_params(setup_.config, lr);
    const int64_t numel = state_.master.numel();
    const int64_t slice = std::min(setup_.sub_group_numel, kPublishSlice);
    for (int64_t group = 0; group < numel; group += setup_.sub_group_numel) {
      const int64_t group_end = std::min(numel, group + setup_.sub_group_numel);
      for (int64_t begin = group; begin < group_end; begin += slice) {
        const int64_t count = std::min(slice, group_end - begin);
        const size_t queued = pending_.size();
        step_range(hp, host_grad, out16, grad_multiplier, begin, count, compute_partition);
        if (progress != nullptr)
          progress->publish(begin + count, std::vector<PartitionWrite>(pending_.begin() + queued, pending_.end()));
      }
    }
    ++state_.step;
    last_copy_seconds_ = 0.0;
    if (setup_.time_copies) {
      for (PartitionWrite& write : pending_) {
        write.done->wait_host();
        last_copy_seconds_ += write.done->seconds();
      }
    }
  }

  // Adam on elements [begin, begin + count), then their compute weights on their way back.
  void step_range(const cpu_adam::AdamHyperParams& hp, const at::Tensor& host_grad, const SixteenBitOutput& out16,
                  double grad_multiplier, int64_t begin, int64_t count, const at::Tensor& compute_partition) {
    cpu_adam::Elements master = tensor_elements(state_.master, begin, count);
    cpu_adam::Elements grads = tensor_elements(host_grad, begin, count);
    const at::Tensor window = out16.sink != nullptr ? out16.sink->lend(begin, count) : at::Tensor();
    cpu_adam::Elements params16{};
    if (out16.sixteen_bit)
      params16 = window.defined() ? tensor_elements(window, 0, count) : tensor_elements(out16.out, begin, count);
    const cpu_adam::AdamBuffers buffers{.params = {static_cast<float*>(master.data), master.count},
                                        .grads = {grads.data, grads.count, grads.type},
                                        .exp_avg = tensor_elements(state_.exp_avg, begin, count),
                                        .exp_avg_sq = tensor_elements(state_.exp_avg_sq, begin, count),
                                        .params16 = params16};
    throw_if_error(setup_.adam->step(hp, state_.step + 1, static_cast<float>(grad_multiplier), buffers));
    if (out16.sink != nullptr) {  // fp32 compute weights: the master's new values
      if (!out16.sixteen_bit) std::memcpy(window.data_ptr(), master.data, window.nbytes());
      pending_.push_back(out16.sink->send(begin, count));
      return;
    }
    if (out16.in_place) return;
    const at::Tensor& source = out16.sixteen_bit ? setup_.params16 : state_.master;
    const void* src = static_cast<const std::byte*>(source.const_data_ptr()) + begin * source.element_size();
    at::Tensor dst = compute_partition.narrow(0, begin, count);
    if (dst.is_cpu()) {
      std::memcpy(dst.data_ptr(), src, dst.nbytes());
    } else {
      pending_.push_back({begin, count, setup_.copies->to_device(dst, src)});
    }
  }

  CpuOffloadAdamSetup setup_;
  AdamPartitionState state_;
  std::vector<PartitionWrite> pending_;  // the last step's copies to the device
  double last_copy_seconds_ = 0.0;
};

}  // namespace

std::unique_ptr<PartitionOptimizer> make_cpu_offload_adam(CpuOffloadAdamSetup setup) {
  return std::make_unique<CpuOffloadAdam>(std::move(setup));
}

}  // namespace tierzero::engine
