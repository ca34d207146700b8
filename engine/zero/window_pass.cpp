#include "engine/zero/internal/window_pass.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <cstddef>
#include <utility>

#include "engine/plan/plan.h"
#include "engine/zero/internal/rng_replay.h"
#include "engine/zero/internal/unit_function.h"

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

void phase(const WindowPassHooks& hooks, const char* name) {
  if (hooks.phase_done) hooks.phase_done(name);
}

// Whether every micro-batch has the same shape, so groups of them can run as one batch.
bool same_shapes(const std::vector<at::Tensor>& batches) {
  return std::all_of(batches.begin(), batches.end(),
                     [&](const at::Tensor& b) { return b.sizes() == batches.front().sizes(); });
}

// `batches` in groups of `group` consecutive micro-batches, each group one tensor (batch dimension
// concatenated); a group of one is the micro-batch itself.
std::vector<at::Tensor> grouped(const std::vector<at::Tensor>& batches, size_t group) {
  if (group == 1) return batches;
  std::vector<at::Tensor> groups;
  for (size_t first = 0; first < batches.size(); first += group)
    groups.push_back(at::cat(at::TensorList(batches.data() + first, group), 0));
  return groups;
}

// One group's graph of a kept decoder layer: its output and the leaves it was built on (the unit's
// parameters, then its input), differentiated by the backward instead of a recomputation.
struct KeptGraph {
  at::Tensor output;
  std::vector<at::Tensor> leaves;
};

}  // namespace

std::vector<at::Tensor> run_window_pass(const FunctionalModel& model, ParamGateway& gateway,
                                        const std::vector<at::Tensor>& input_ids,
                                        const std::vector<at::Tensor>& targets, double loss_multiplier,
                                        const WindowPassHooks& hooks, const WindowShape& shape) {
  const size_t batches = input_ids.size();
  const size_t head = model.num_units() - 1;
  // Micro-batches of one shape run the body units `per` at a time; the head runs one at a time.
  const size_t per = shape.group > 1 && batches % static_cast<size_t>(shape.group) == 0 && same_shapes(input_ids)
                         ? static_cast<size_t>(shape.group)
                         : 1;
  const size_t groups = batches / per;
  const int64_t rows = input_ids.front().size(0);  // a micro-batch's sequences: its rows in a group
  // Units first_kept .. head - 1 keep their graphs (never unit 0, whose input is the token ids; a model
  // has at least that unit and the head).
  const size_t first_kept = head - std::min(static_cast<size_t>(std::max<int64_t>(shape.kept_layers, 0)), head - 1);
  const auto is_kept = [&](size_t unit) { return unit >= first_kept && unit < head; };
  // inputs[u][g]: unit u's input for group g (u = 0: the token ids); graphs[u][g]: a kept unit's.
  std::vector<std::vector<at::Tensor>> inputs(model.num_units());
  std::vector<std::vector<KeptGraph>> graphs(model.num_units());
  // rng[u][g]: the generator state unit u's forward on group g started from (models with a random
  // forward only); its recomputation replays it. The head runs only once, from the state the
  // forwards left; a kept unit's graph holds its forward's own draws.
  std::vector<std::vector<RngSnapshot>> rng(model.num_units(), std::vector<RngSnapshot>(groups));
  const bool random = model.forward_is_random();
  inputs[0] = grouped(input_ids, per);
  for (size_t unit = 0; unit < head; ++unit) {
    std::vector<at::Tensor> params = gateway.fetch(unit);
    inputs[unit + 1].resize(groups);
    if (is_kept(unit)) {
      graphs[unit].resize(groups);
      const at::AutoGradMode grad_mode(true);
      for (size_t g = 0; g < groups; ++g) {
        KeptGraph& graph = graphs[unit][g];
        graph.leaves = grad_leaves(params);
        graph.leaves.push_back(inputs[unit][g].detach().requires_grad_(true));
        inputs[unit][g] = at::Tensor();  // the graph holds what its backward needs
        graph.output = model.forward_unit(unit, graph.leaves.back(), at::TensorList(graph.leaves.data(), params.size()));
        inputs[unit + 1][g] = graph.output.detach();
      }
    } else {
      const at::NoGradGuard no_grad;
      for (size_t g = 0; g < groups; ++g) {
        rng[unit][g] = RngSnapshot::capture_if(random, inputs[unit][g].device());
        inputs[unit + 1][g] = model.forward_unit(unit, inputs[unit][g], params);
      }
    }
    params.clear();
    gateway.release(unit);  // a kept unit's parameters stay referenced by its graphs
  }
  phase(hooks, "forward");
  if (hooks.before_backward) hooks.before_backward();

  std::vector<at::Tensor> losses(batches);
  std::vector<at::Tensor> output_grads(groups);  // d(loss * multiplier) / d(unit output), per group
  for (size_t unit = head + 1; unit-- > 0;) {
    const bool kept = is_kept(unit);
    std::vector<at::Tensor> params = kept ? std::vector<at::Tensor>() : gateway.fetch(unit);
    const size_t count = kept ? model.unit_params(unit).size() : params.size();
    std::vector<at::Tensor> sums(count);
    const size_t runs = unit == head ? batches : groups;  // the head: micro-batch by micro-batch
    std::vector<at::Tensor> input_grads(runs);
    for (size_t r = 0; r < runs; ++r) {
      torch::autograd::variable_list grads;
      bool input_has_grad = true;
      if (kept) {
        const KeptGraph graph = std::move(graphs[unit][r]);
        grads = torch::autograd::grad({graph.output}, graph.leaves, {output_grads[r]}, /*retain_graph=*/false,
                                      /*create_graph=*/false, /*allow_unused=*/true);
      } else {
        const size_t g = unit == head ? r / per : r;
        const at::Tensor& stored = inputs[unit][g];
        const at::Tensor x =
            unit == head && per > 1 ? stored.narrow(0, static_cast<int64_t>(r % per) * rows, rows) : stored;
        std::vector<at::Tensor> leaves = grad_leaves(params);
        input_has_grad = at::isFloatingType(x.scalar_type());
        const at::Tensor input = x.detach().requires_grad_(input_has_grad);
        if (input_has_grad) leaves.push_back(input);
        if (unit != head || r % per == per - 1) inputs[unit][g] = at::Tensor();  // its last recomputation
        if (leaves.empty()) continue;  // nothing to differentiate: a frozen unit on token ids (LoRA's embedding)
        const at::AutoGradMode grad_mode(true);
        const RngReplay replay(rng[unit][g]);
        const at::Tensor output = model.forward_unit(unit, input, at::TensorList(leaves.data(), count));
        if (unit == head) {
          const at::Tensor logits = output.to(at::kFloat);
          const at::Tensor loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), targets[r].reshape(-1),
                                                         /*weight=*/{}, at::Reduction::Mean, /*ignore_index=*/-100);
          losses[r] = loss.detach();
          grads = torch::autograd::grad({loss * loss_multiplier}, leaves, {}, /*retain_graph=*/false,
                                        /*create_graph=*/false, /*allow_unused=*/true);
        } else {
          grads = torch::autograd::grad({output}, leaves, {output_grads[g]}, /*retain_graph=*/false,
                                        /*create_graph=*/false, /*allow_unused=*/true);
        }
      }
      if (input_has_grad) input_grads[r] = grads.back();
      add_grads(sums, grads, count);
    }
    output_grads = unit == head ? grouped(input_grads, per) : std::move(input_grads);
    params.clear();
    gateway.reduce_grads(unit, std::move(sums));
    if (hooks.unit_backward_done) hooks.unit_backward_done(unit);
    if (!kept) gateway.release(unit);
  }
  phase(hooks, "backward");
  return losses;
}

uint64_t window_pass_extra_bytes(const FunctionalModel& model, int64_t micro_batches, int64_t tokens,
                                 at::ScalarType compute_dtype) {
  int64_t largest_unit = 0;
  for (size_t u = 0; u < model.num_units(); ++u) {
    int64_t numel = 0;
    for (const ParamSpec& p : model.unit_params(u)) numel += c10::multiply_integers(p.shape);
    largest_unit = std::max(largest_unit, numel);
  }
  return plan::window_bytes(micro_batches, tokens, model.config().hidden_size,
                            static_cast<int64_t>(model.num_units()), largest_unit,
                            static_cast<int>(c10::elementSize(compute_dtype)));
}

}  // namespace tierzero::engine
