// Adam offloaded to the CPU: state in host memory (pinned when CUDA exists), stepped by cpu_adam's
// fused SIMD kernel, which also writes the 16-bit weights that go back to the device.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/status.h"
#include "cpu_adam/adam.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {
namespace {

cpu_adam::ConstElements const_elements_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return {t.const_data_ptr(), static_cast<size_t>(t.numel()), ElementType::kF32};
    case at::kBFloat16: return {t.const_data_ptr(), static_cast<size_t>(t.numel()), ElementType::kBF16};
    case at::kHalf: return {t.const_data_ptr(), static_cast<size_t>(t.numel()), ElementType::kF16};
    default:
      throw Error(internal_error(std::string("cpu optimizer: unsupported gradient dtype ") +
                                 c10::toString(t.scalar_type())));
  }
}

cpu_adam::Elements elements_of(at::Tensor& t) {
  cpu_adam::ConstElements c = const_elements_of(t);
  return {t.data_ptr(), c.count, c.type};
}

class CpuOffloadAdam final : public PartitionOptimizer {
 public:
  CpuOffloadAdam(const at::Tensor& master, const AdamConfig& config, int threads)
      : config_(config), adam_(cpu_adam::CpuAdamOptions{.threads = threads}) {
    host_options_ = at::TensorOptions().dtype(at::kFloat).pinned_memory(at::hasCUDA());
    state_.master = at::empty({master.numel()}, host_options_);
    state_.master.copy_(master.reshape(-1));
    state_.exp_avg = at::zeros({master.numel()}, host_options_);
    state_.exp_avg_sq = at::zeros({master.numel()}, host_options_);
  }

  double grad_sq_norm(const at::Tensor& grad) override {
    at::Tensor host = grad.cpu().contiguous();
    cpu_adam::GradStats stats = adam_.grad_stats(const_elements_of(host));
    return stats.finite ? stats.sq_norm : std::numeric_limits<double>::infinity();
  }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition) override {
    at::Tensor host_grad = grad.cpu().contiguous();
    at::ScalarType compute_dtype = compute_partition.scalar_type();
    bool sixteen_bit = compute_dtype == at::kBFloat16 || compute_dtype == at::kHalf;
    // 16-bit weights in host memory (ZeRO-3 offloaded parameters, or a CPU run): the kernel writes
    // them in place; otherwise into a host buffer copied to the device after the step.
    const bool write_in_place = sixteen_bit && compute_partition.is_cpu() && compute_partition.is_contiguous();
    if (sixteen_bit && !write_in_place && (!params16_.defined() || params16_.scalar_type() != compute_dtype))
      params16_ = at::empty({state_.master.numel()}, host_options_.dtype(compute_dtype));
    at::Tensor& params16 = write_in_place ? compute_partition : params16_;

    cpu_adam::AdamHyperParams hp{.lr = lr,
                                 .beta1 = config_.beta1,
                                 .beta2 = config_.beta2,
                                 .eps = config_.eps,
                                 .weight_decay = config_.weight_decay,
                                 .mode = config_.decoupled_weight_decay ? cpu_adam::AdamMode::kAdamW
                                                                        : cpu_adam::AdamMode::kAdam,
                                 .bias_correction = config_.bias_correction};
    cpu_adam::AdamBuffers buffers{
        .params = {state_.master.data_ptr<float>(), static_cast<size_t>(state_.master.numel())},
        .grads = const_elements_of(host_grad),
        .exp_avg = elements_of(state_.exp_avg),
        .exp_avg_sq = elements_of(state_.exp_avg_sq),
        .params16 = sixteen_bit ? elements_of(params16) : cpu_adam::Elements{}};
    throw_if_error(adam_.step(hp, state_.step + 1, static_cast<float>(grad_multiplier), buffers));
    ++state_.step;
    if (!write_in_place) compute_partition.copy_(sixteen_bit ? params16_ : state_.master);
  }

  AdamPartitionState& state() override { return state_; }

  int64_t pinned_bytes() const override {
    if (!host_options_.pinned_memory()) return 0;
    int64_t bytes = 3 * state_.master.nbytes();
    if (params16_.defined()) bytes += params16_.nbytes();
    return bytes;
  }

  std::string placement() const override {
    return "cpu (" + cpu_adam::simd_target_name() + ", " + std::to_string(adam_.threads()) + " threads)";
  }

 private:
  AdamConfig config_;
  cpu_adam::CpuAdam adam_;
  at::TensorOptions host_options_;
  AdamPartitionState state_;
  at::Tensor params16_;  // host copy of the updated 16-bit weights for a device compute partition
};

}  // namespace

std::unique_ptr<PartitionOptimizer> make_cpu_offload_adam(const at::Tensor& master_partition, const AdamConfig& config,
                                                          int threads) {
  return std::make_unique<CpuOffloadAdam>(master_partition, config, threads);
}

}  // namespace tierzero::engine
