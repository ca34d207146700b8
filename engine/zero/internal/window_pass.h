// A window of micro-batches run unit-major both ways, so each unit's parameters cross to the GPU
// twice per step (once for the window's forwards, once for its backwards) and its gradients leave
// the GPU once, whatever the gradient accumulation:
//
//   forward:   for each body unit u, fetch u once, run it on every micro-batch without a graph,
//              keep each micro-batch's input of u, release u;
//   head:      fetch the last unit (norm + LM head), and for each micro-batch recompute it with
//              grad, take the loss, its gradient wrt the head's input and parameters;
//   backward:  for each unit from the last body unit down to 0, fetch it once, and for each
//              micro-batch recompute it from the kept input with grad and take the input and
//              parameter gradients for that micro-batch's output gradient; the parameter gradients
//              are summed over the micro-batches in fp32 on the device (micro-batch order) and handed
//              to the gateway once, then the unit is released.
//
// Groups: with `group` G > 1 (tierzero.window_group; the micro-batches all of one shape, G dividing
// their count), the body units run G consecutive micro-batches as one batch both ways — one forward
// and one recomputation + backward per group, larger matrix products and G times fewer fp32
// additions; the head (norm + LM head, whose fp32 logits dominate its memory) still runs micro-batch
// by micro-batch. A group's parameter gradient is summed over its micro-batches inside the matrix
// product (fp32 accumulation, one rounding to the compute dtype) instead of rounded per micro-batch
// and added in fp32: other bits than G = 1's, as close to the exact sum. G = 1 is the path below.
//
// Kept layers: with `kept_layers` K > 0 (tierzero.kept_activations) the last K decoder layers (body
// units head-K .. head-1; never unit 0, the embedding) run their forward with grad and keep each
// group's graph, output and leaves until their backward, which then differentiates that graph
// instead of recomputing the layer; their parameters stay referenced by the graphs and are not
// fetched again (the gateway sees one fetch and one release a step for each). The same operations on
// the same inputs as the recomputation: the same gradients, without the recomputation's FLOPs, for
// every micro-batch's activations of those layers held on the device from forward to backward.
//
// The per-micro-batch gradients are the ones the micro-batch-major path computes (the same
// recomputation, the same kernels), and their fp32 sum in micro-batch order is the sum the device
// gradient accumulator forms (offloaded_grads.h), so on one rank a run is the same bits as that
// path — except for a tied weight (a parameter of two units), whose two uses are summed over the
// micro-batches separately and then added, instead of use by use, and for a model with a random
// forward (LoRA dropout), whose draws come unit-major here: other masks, each replayed by its own
// recomputation (rng_replay.h). With more ranks each rank's window
// sum is reduced once, where that path reduces every micro-batch: the same sums in another fp32 order.
// Device memory: every micro-batch's input of every body unit (as the unit-major forward keeps), one
// output gradient per micro-batch, and one unit's fp32 gradient sums; with kept layers their graphs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/zero/internal/param_gateway.h"

namespace tierzero::engine {

// What a window pass calls between its phases.
struct WindowPassHooks {
  // After the forwards, before the first gradient reaches the gateway (the engine waits there for
  // an optimizer step still reading the gradient partition).
  std::function<void()> before_backward;
  // After unit `unit`'s parameter gradients, summed over every micro-batch, went to the gateway
  // (reduce_grads), last unit first.
  std::function<void(size_t unit)> unit_backward_done;
  // At each phase's end with its name ("forward", "backward"), for timing.
  std::function<void(const char* phase)> phase_done;
};

// How the window runs its body units (above).
struct WindowShape {
  int64_t group = 1;        // micro-batches a body unit takes at once (tierzero.window_group)
  int64_t kept_layers = 0;  // the last decoder layers whose graphs are kept (tierzero.kept_activations)
};

// Runs the window: `input_ids[i]` and `targets[i]` ([B, T] int64 on the compute device, targets
// already shifted, -100 ignored) are micro-batch i. Backpropagates each micro-batch's mean
// cross-entropy times `loss_multiplier` into the gateway's gradients. Returns each micro-batch's
// loss (fp32 scalar on the device, unscaled, detached). `model` and `gateway` are used only during
// the call. The body units run `shape.group` micro-batches at a time (above) when it divides their
// count and they share one shape, else one at a time; the last `shape.kept_layers` decoder layers (at
// most the body units but unit 0) are not recomputed. Throws tierzero::Error from the gateway or the
// model.
std::vector<at::Tensor> run_window_pass(const FunctionalModel& model, ParamGateway& gateway,
                                        const std::vector<at::Tensor>& input_ids,
                                        const std::vector<at::Tensor>& targets, double loss_multiplier,
                                        const WindowPassHooks& hooks, const WindowShape& shape = {});

// Device bytes a window pass of `micro_batches` micro-batches of `tokens` tokens each holds beyond
// what one micro-batch run micro-batch-major holds: (A - 1) more inputs of every body unit and output
// gradients (hidden states in `compute_dtype`), and the fp32 gradient sums of the largest unit.
uint64_t window_pass_extra_bytes(const FunctionalModel& model, int64_t micro_batches, int64_t tokens,
                                 at::ScalarType compute_dtype);

}  // namespace tierzero::engine
