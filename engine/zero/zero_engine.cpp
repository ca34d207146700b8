#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>

#include <cmath>

#include "engine/zero/internal/unit_function.h"

namespace tierzero::engine {

ZeroEngine::ZeroEngine(const FunctionalModel& model, const std::map<std::string, at::Tensor>& params,
                       const ZeroEngineOptions& options, Comm& comm)
    : model_(model), comm_(comm), options_(options) {
  throw_if_error(check_params(model, params));
  if (options.partition.stage < 0 || options.partition.stage > 3)
    throw Error(invalid_argument("zero_optimization.stage=" + std::to_string(options.partition.stage) +
                                 " is not 0, 1, 2 or 3"));
  if (options.partition.offload_params && options.partition.stage != 3)
    throw Error(invalid_argument("offload_param needs zero_optimization.stage 3 (stage is " +
                                 std::to_string(options.partition.stage) + "); set stage 3 or remove offload_param"));
  options_.partition.grad_device = options.offload_optimizer ? at::Device(at::kCPU) : comm.device();
  partitioner_ = make_partitioner(model, params, options_.partition, comm);
  at::Tensor master = partitioner_->partition_of(params, options_.partition.grad_device);
  optimizer_ = options.offload_optimizer ? make_cpu_offload_adam(master, options.adam, options.cpu_threads)
                                         : make_device_adam(master, options.adam);
}

double ZeroEngine::forward_backward(const at::Tensor& input_ids, const at::Tensor& targets, double loss_multiplier) {
  at::Device device = comm_.device();
  at::Tensor anchor = at::ones({}, at::TensorOptions().dtype(at::kFloat).device(device)).requires_grad_(true);
  at::Tensor hidden = input_ids.to(device);
  for (size_t unit = 0; unit < model_.num_units(); ++unit)
    hidden = run_unit(model_, *partitioner_, unit, hidden, anchor);
  at::Tensor logits = hidden.to(at::kFloat);
  at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets.to(device).reshape(-1),
                                           /*weight=*/{}, at::Reduction::Mean, /*ignore_index=*/-100);
  (loss * loss_multiplier).backward();
  return loss.item<double>();
}

StepOutcome ZeroEngine::step(double lr, double loss_scale) {
  partitioner_->finish_reduction();
  at::Tensor grad = partitioner_->grad_partition();
  double sq_norm = optimizer_->grad_sq_norm(grad);
  if (partitioner_->partitioned()) {
    at::Tensor total = at::full({1}, sq_norm, at::TensorOptions().dtype(at::kDouble).device(comm_.device()));
    comm_.all_reduce_sum(total).wait();
    sq_norm = total.item<double>();
  }
  StepOutcome outcome;
  outcome.grad_norm = std::sqrt(sq_norm) / loss_scale;
  outcome.overflow = !std::isfinite(outcome.grad_norm);
  if (!outcome.overflow) {
    // DeepSpeed's unscale_and_clip_grads: one factor that both unscales and clips.
    double combined_scale = loss_scale;
    if (options_.gradient_clipping > 0.0) {
      double clip = (outcome.grad_norm + 1e-6) / options_.gradient_clipping;
      if (clip > 1.0) combined_scale = clip * loss_scale;
    }
    optimizer_->step(grad, 1.0 / combined_scale, lr, partitioner_->compute_partition());
  }
  partitioner_->publish_compute_partition();
  partitioner_->zero_grads();
  return outcome;
}

std::map<std::string, at::Tensor> ZeroEngine::master_params() {
  return partitioner_->assemble(optimizer_->state().master);
}

void ZeroEngine::sync_compute_params() {
  partitioner_->compute_partition().copy_(optimizer_->state().master);
  partitioner_->publish_compute_partition();
}

double ZeroEngine::mean_over_ranks(double value) {
  if (comm_.world_size() == 1) return value;
  at::Tensor t = at::full({1}, value, at::TensorOptions().dtype(at::kDouble).device(comm_.device()));
  comm_.all_reduce_sum(t).wait();
  return t.item<double>() / comm_.world_size();
}

}  // namespace tierzero::engine
