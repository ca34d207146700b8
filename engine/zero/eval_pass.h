// A forward-only pass through a ZeRO engine, for evaluating held-out data between training steps.
// It runs the model as a training micro-batch's forward does, unit by unit through the engine's
// partitioner (stage 3: each unit's parameters all-gathered before it runs and released after;
// offloaded parameters streamed from pinned memory or NVMe the same way), but without autograd,
// gradients or optimizer work, and it leaves the training state as it found it: the weights, the
// optimizer, the gradients and the micro-batch count of the accumulation window are untouched, and
// at stage 3 the gathered parameters are dropped afterwards so the next step starts as it would have.
// LoRA dropout is off inside it (transformers' model.eval()).
#pragma once

#include <ATen/core/Tensor.h>

#include "engine/zero/zero_engine.h"

namespace tierzero::engine {

// The sum, over the positions of `targets` [B, T] int64 that are not -100, of the cross-entropy of
// the model's fp32 logits for `input_ids` [B, T] int64 — the per-token losses a training step
// averages — as a double scalar on the compute device (the host does not wait for it). Waits first
// for an optimizer step still running. A collective at stage 3 (the gathers): every rank calls it
// the same number of times.
at::Tensor queue_eval_loss_sum(ZeroEngine& engine, const at::Tensor& input_ids, const at::Tensor& targets);

}  // namespace tierzero::engine
