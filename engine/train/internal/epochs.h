// Private: `train --epochs E` (the HF Trainer's num_train_epochs) and how far through its data a
// run is.
//
// A rank's data is one stream of micro-batches, epoch after epoch (engine/data/token_data.h: every
// epoch a fresh seeded permutation of the N training samples; each of the W ranks yields
// M = floor(floor(N / W) / B) micro-batches of B samples an epoch). A step takes A micro-batches
// (gradient_accumulation_steps), so E epochs (E may be fractional) are
//     steps = ceil(E * M / A), at least 1.
// When A does not divide M, the window of one step runs across the epoch boundary: its first
// micro-batches end epoch e, the rest begin epoch e + 1. (The HF Trainer instead ends every epoch
// with a smaller step of the M mod A micro-batches left, ceil(M / A) steps an epoch; tierzero's steps
// always take A micro-batches.) So every micro-batch of the E epochs is trained on, and the last step
// may read up to A - 1 micro-batches of the epoch after.
#pragma once

#include <cstdint>
#include <string>

#include "engine/data/token_data.h"

namespace tierzero::engine::trainer {

// Optimizer steps for `epochs` (> 0) over data of `micro_batches_per_epoch` micro-batches per rank,
// `accumulation` a step (the rule above).
int64_t steps_for_epochs(double epochs, int64_t micro_batches_per_epoch, int64_t accumulation);

// Epochs done at `data`'s position: the epoch's number plus the share of its micro-batches consumed
// (1.37 after 37 of epoch 1's 100), the HF Trainer's fractional `epoch`.
double epochs_done(const MicroBatchIterator& data);

// How often a training sample was used after `epochs` done: "each training sample seen 2 times", or
// "training samples seen 1 or 2 times" mid-epoch.
std::string times_seen(double epochs);

}  // namespace tierzero::engine::trainer
