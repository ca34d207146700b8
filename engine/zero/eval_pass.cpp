#include "engine/zero/zero_engine.h"

#include <ATen/ATen.h>

#include <vector>

#include "engine/model/functional_model.h"
#include "engine/zero/internal/partitioner.h"
#include "offload/torch/offload_torch.h"

namespace tierzero::engine {
at::Tensor queue_eval_loss_sum(ZeroEngine& engine, const at::Tensor& input_ids, const at::Tensor& targets) {
  Partitioner& partitioner = engine.partitioner();  // waits for the optimizer step in flight
  const FunctionalModel& model = engine.model();
  const at::Device device = engine.comm().device();
  const NoDropoutScope no_dropout;
  at::NoGradGuard no_grad;
  at::Tensor hidden = offload::inputs_to_device(input_ids, device);
  for (size_t unit = 0; unit < model.num_units(); ++unit) {
    std::vector<at::Tensor> params = partitioner.fetch(unit);
    hidden = model.forward_unit(unit, hidden, params);
    params.clear();
    partitioner.release(unit);
  }
  partitioner.end_forward_pass();
  const at::Tensor logits = hidden.to(at::kFloat);
  const at::Tensor loss_sum = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                                     offload::inputs_to_device(targets, device).reshape(-1),
                                                     /*weight=*/{}, at::Reduction::Sum, /*ignore_index=*/-100);
  return loss_sum.to(at::kDouble);
}

}  // namespace tierzero::engine
