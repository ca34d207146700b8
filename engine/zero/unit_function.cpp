#include "engine/zero/internal/unit_function.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>
#include <vector>

#include "engine/zero/internal/rng_replay.h"

namespace tierzero::engine {
namespace {

// What a unit's backward needs besides its saved input. Lives in the AutogradContext as integers
// (the context stores IValues); model and gateway outlive the graph by run_unit's contract.
struct UnitRef {
  const FunctionalModel* model;
  ParamGateway* gateway;
  size_t unit;
};

class UnitFunction : public torch::autograd::Function<UnitFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input, const at::Tensor& anchor,
                            UnitRef ref) {
    ctx->saved_data["model"] = reinterpret_cast<int64_t>(ref.model);
    ctx->saved_data["gateway"] = reinterpret_cast<int64_t>(ref.gateway);
    ctx->saved_data["unit"] = static_cast<int64_t>(ref.unit);
    ctx->save_for_backward({input});
    const RngSnapshot rng = RngSnapshot::capture_if(ref.model->forward_is_random(), input.device());
    if (!rng.empty()) ctx->saved_data["rng"] = rng.state();
    std::vector<at::Tensor> params = ref.gateway->fetch(ref.unit);
    at::Tensor output;
    {
      at::NoGradGuard no_grad;
      output = ref.model->forward_unit(ref.unit, input, params);
    }
    params.clear();
    ref.gateway->release(ref.unit);
    return output;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    UnitRef ref{reinterpret_cast<const FunctionalModel*>(ctx->saved_data["model"].toInt()),
                reinterpret_cast<ParamGateway*>(ctx->saved_data["gateway"].toInt()),
                static_cast<size_t>(ctx->saved_data["unit"].toInt())};
    at::Tensor input = ctx->get_saved_variables()[0];
    bool input_has_grad = at::isFloatingType(input.scalar_type());

    if (!input_has_grad && ref.model->unit_params(ref.unit).empty()) {
      // Nothing to differentiate (a frozen unit on token ids: LoRA's embedding): no recomputation.
      ref.gateway->fetch(ref.unit);
      ref.gateway->reduce_grads(ref.unit, {});
      ref.gateway->release(ref.unit);
      return {at::Tensor(), at::Tensor(), at::Tensor()};
    }
    std::vector<at::Tensor> params = ref.gateway->fetch(ref.unit);
    std::vector<at::Tensor> leaves = grad_leaves(params);
    at::Tensor recompute_input = input.detach().requires_grad_(input_has_grad);
    if (input_has_grad) leaves.push_back(recompute_input);

    torch::autograd::variable_list grads;
    {
      at::AutoGradMode grad_mode(true);
      const auto rng = ctx->saved_data.find("rng");  // the forward's draws, when it drew any
      const RngReplay replay(
          RngSnapshot(input.device(), rng == ctx->saved_data.end() ? at::Tensor() : rng->second.toTensor()));
      at::Tensor output =
          ref.model->forward_unit(ref.unit, recompute_input, at::TensorList(leaves.data(), params.size()));
      grads = torch::autograd::grad({output}, leaves, {grad_outputs[0]}, /*retain_graph=*/false,
                                    /*create_graph=*/false, /*allow_unused=*/true);
    }
    at::Tensor input_grad = input_has_grad ? grads.back() : at::Tensor();
    if (input_has_grad) grads.pop_back();
    leaves.clear();
    params.clear();
    ref.gateway->reduce_grads(ref.unit, std::move(grads));
    ref.gateway->release(ref.unit);
    return {input_grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::vector<at::Tensor> grad_leaves(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> leaves;
  leaves.reserve(params.size() + 1);
  for (const at::Tensor& p : params) leaves.push_back(p.detach().requires_grad_(true));
  return leaves;
}

at::Tensor run_unit(const FunctionalModel& model, ParamGateway& gateway, size_t unit, const at::Tensor& input,
                    const at::Tensor& anchor) {
  return UnitFunction::apply(input, anchor, UnitRef{&model, &gateway, unit});
}

}  // namespace tierzero::engine
