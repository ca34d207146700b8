// Adam on the compute device with LibTorch's fused (Adam|AdamW) kernel.
#include <ATen/ATen.h>

#include "common/common.h"
#include "engine/zero/internal/partition_optimizer.h"

namespace tierzero::engine {
namespace {

class DeviceAdam final : public PartitionOptimizer {
 public:
  DeviceAdam(at::Tensor master, const AdamConfig& config) : config_(config) {
    if (!config.bias_correction)
      throw Error(
          unsupported("optimizer.params.bias_correction=false needs the CPU optimizer: set "
                      "zero_optimization.offload_optimizer.device to \"cpu\""));
    state_.master = master.to(at::kFloat).contiguous();
    state_.exp_avg = at::zeros_like(state_.master);
    state_.exp_avg_sq = at::zeros_like(state_.master);
  }

  void step(const at::Tensor& grad, double grad_multiplier, double lr, at::Tensor compute_partition,
            StepProgress* progress, GradsFinal* grads_final) override {
    if (grads_final != nullptr)
      throw Error(internal_error("the device optimizer does not step inside the backward (it reads the whole gradient)"));
    if (progress != nullptr)
      throw Error(internal_error("the device optimizer's step does not follow into the next forward (no progress)"));
    at::Tensor g = grad.to(state_.master.device(), at::kFloat);
    if (grad_multiplier != 1.0) g = g * grad_multiplier;
    ++state_.step;
    at::Tensor step_count = at::full({}, static_cast<double>(state_.step), state_.master.options());
    if (config_.decoupled_weight_decay) {
      at::_fused_adamw_({state_.master}, {g}, {state_.exp_avg}, {state_.exp_avg_sq}, {}, {step_count}, lr,
                        config_.beta1, config_.beta2, config_.weight_decay, config_.eps, /*amsgrad=*/false,
                        /*maximize=*/false);
    } else {
      at::_fused_adam_({state_.master}, {g}, {state_.exp_avg}, {state_.exp_avg_sq}, {}, {step_count}, lr, config_.beta1,
                       config_.beta2, config_.weight_decay, config_.eps, /*amsgrad=*/false,
                       /*maximize=*/false);
    }
    compute_partition.copy_(state_.master);
  }

  AdamPartitionState& state() override { return state_; }
  std::string placement() const override { return "device"; }

 private:
  AdamConfig config_;
  AdamPartitionState state_;
};

}  // namespace

std::unique_ptr<PartitionOptimizer> make_device_adam(at::Tensor master_partition, const AdamConfig& config) {
  return std::make_unique<DeviceAdam>(std::move(master_partition), config);
}

}  // namespace tierzero::engine
