#include "engine/zero/internal/window_pass.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstddef>
#include <utility>

#include "engine/plan/plan.h"
#include "engine/zero/internal/rng_replay.h"

namespace tierzero::engine {
namespace {

// Adds one micro-batch's parameter gradients `grads` into `sums` (fp32 on the device; an undefined
// gradient adds nothing). The first defined gradient of a parameter becomes its sum, widened.
void add_grads(std::vector<at::Tensor>& sums, const torch::autograd::variable_list& grads, size_t count) {
  for (size_t j = 0; j < count; ++j) {
    const at::Tensor& g = grads[j];
    if (!g.defined()) continue;
    if (!sums[j].defined()) {
      sums[j] = g.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
    } else {
      sums[j].add_(g);
    }
  }
}

// Leaves that require grad over a unit's fetched parameters.
std::vector<at::Tensor> grad_leaves(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> leaves;
  leaves.reserve(params.size() + 1);
  for (const at::Tensor& p : params) leaves.push_back(p.detach().requires_grad_(true));
  return leaves;
}

void phase(const WindowPassHooks& hooks, const char* name) {
  if (hooks.phase_done) hooks.phase_done(name);
}

}  // namespace

std::vector<at::Tensor> run_window_pass(const FunctionalModel& model, ParamGateway& gateway,
                                        const std::vector<at::Tensor>& input_ids,
                                        const std::vector<at::Tensor>& targets, double loss_multiplier,
                                        const WindowPassHooks& hooks) {
  const size_t batches = input_ids.size();
  const size_t head = model.num_units() - 1;
  // inputs[u][i]: unit u's input for micro-batch i (u = 0: the token ids).
  std::vector<std::vector<at::Tensor>> inputs(model.num_units());
  // rng[u][i]: the generator state unit u's forward on micro-batch i started from (models with a
  // random forward only); its recomputation replays it. The head runs only once, from the state the
  // forwards left.
  std::vector<std::vector<RngSnapshot>> rng(model.num_units(), std::vector<RngSnapshot>(batches));
  const bool random = model.forward_is_random();
  inputs[0] = input_ids;
  for (size_t unit = 0; unit < head; ++unit) {
    std::vector<at::Tensor> params = gateway.fetch(unit);
    inputs[unit + 1].resize(batches);
    {
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < batches; ++i) {
        rng[unit][i] = RngSnapshot::capture_if(random, inputs[unit][i].device());
        inputs[unit + 1][i] = model.forward_unit(unit, inputs[unit][i], params);
      }
    }
    params.clear();
    gateway.release(unit);
  }
  phase(hooks, "forward");
  if (hooks.before_backward) hooks.before_backward();

  std::vector<at::Tensor> losses(batches);
  std::vector<at::Tensor> output_grads(batches);  // d(loss * multiplier) / d(unit output), per micro-batch
  for (size_t unit = head + 1; unit-- > 0;) {
    std::vector<at::Tensor> params = gateway.fetch(unit);
    const size_t count = params.size();
    std::vector<at::Tensor> sums(count);
    for (size_t i = 0; i < batches; ++i) {
      std::vector<at::Tensor> leaves = grad_leaves(params);
      const bool input_has_grad = at::isFloatingType(inputs[unit][i].scalar_type());
      const at::Tensor input = inputs[unit][i].detach().requires_grad_(input_has_grad);
      if (input_has_grad) leaves.push_back(input);
      if (leaves.empty()) {  // nothing to differentiate: a frozen unit on token ids (LoRA's embedding)
        inputs[unit][i] = at::Tensor();
        continue;
      }
      torch::autograd::variable_list grads;
      {
        at::AutoGradMode grad_mode(true);
        const RngReplay replay(rng[unit][i]);
        const at::Tensor output = model.forward_unit(unit, input, at::TensorList(leaves.data(), count));
        if (unit == head) {
          const at::Tensor logits = output.to(at::kFloat);
          const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets[i].reshape(-1),
                                                         /*weight=*/{}, at::Reduction::Mean, /*ignore_index=*/-100);
          losses[i] = loss.detach();
          grads = torch::autograd::grad({loss * loss_multiplier}, leaves, {}, /*retain_graph=*/false,
                                        /*create_graph=*/false, /*allow_unused=*/true);
        } else {
          grads = torch::autograd::grad({output}, leaves, {output_grads[i]}, /*retain_graph=*/false,
                                        /*create_graph=*/false, /*allow_unused=*/true);
        }
      }
      output_grads[i] = input_has_grad ? grads.back() : at::Tensor();
      inputs[unit][i] = at::Tensor();  // its recomputation is done
      add_grads(sums, grads, count);
    }
    params.clear();
    gateway.reduce_grads(unit, std::move(sums));
    if (hooks.unit_backward_done) hooks.unit_backward_done(unit);
    gateway.release(unit);
  }
  phase(hooks, "backward");
  return losses;
}

uint64_t window_pass_extra_bytes(const FunctionalModel& model, int64_t micro_batches, int64_t tokens,
                                 at::ScalarType compute_dtype) {
  int64_t largest_unit = 0;
  for (size_t u = 0; u < model.num_units(); ++u) {
    int64_t numel = 0;
    for (const ParamSpec& p : model.unit_params(u)) {
      int64_t n = 1;
      for (int64_t d : p.shape) n *= d;
      numel += n;
    }
    largest_unit = std::max(largest_unit, numel);
  }
  return plan::window_bytes(micro_batches, tokens, model.config().hidden_size,
                            static_cast<int64_t>(model.num_units()), largest_unit,
                            static_cast<int>(c10::elementSize(compute_dtype)));
}

}  // namespace tierzero::engine
