// Runs one model unit (embedding, a decoder layer, or norm + LM head) inside one custom autograd
// Function, so that parameter residency, ZeRO and recomputation live in one place per unit:
//   forward:  fetch the unit's parameters, run it without recording a graph, keep only the input,
//             release the parameters;
//   backward: fetch again, recompute the unit with grad enabled (activation checkpointing for
//             free), take the input and parameter gradients, hand the parameter gradients to the
//             gateway (which reduces them), release, and return the input gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

#include "engine/model/functional_model.h"
#include "engine/zero/internal/param_gateway.h"

namespace tierzero::engine {

// Returns unit `unit` of `model` applied to `input`, recorded as one autograd node. `anchor` is a
// scalar that requires grad: it makes unit 0 (whose input, token ids, has no gradient) part of
// the graph, so its backward runs and its parameter gradients reach `gateway`. `model` and
// `gateway` must outlive the backward pass.
at::Tensor run_unit(const FunctionalModel& model, ParamGateway& gateway, size_t unit, const at::Tensor& input,
                    const at::Tensor& anchor);

// Leaves that require grad over a unit's fetched parameters, for its recomputation (room reserved for
// the input's leaf after them).
std::vector<at::Tensor> grad_leaves(const std::vector<at::Tensor>& params);

}  // namespace tierzero::engine
