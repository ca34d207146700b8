// Saving and resuming a ZeRO engine through checkpoint/'s engine checkpoints
// (checkpoint/engine_checkpoint.h): one flat group holding every parameter in first-use order,
// with three fp32 states (master weights, exp_avg, exp_avg_sq), each rank writing its own
// partition in the layout its stage uses (DeepSpeed's padding rules), so the files map 1:1 onto
// the engine's buffers. The manifest carries the Adam step count, the loss scaler and LR schedule
// state and the model's HF config.json; each rank's record carries its iteration and data position.
//
// Resume reproduces the uninterrupted run exactly at the same world size; at another world size
// the checkpoint reader re-partitions the states (same stage required).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine {

// Training state kept beside the engine's partitions.
struct CheckpointExtras {
  int64_t iteration = 0;        // training iterations done (fp16-skipped steps included)
  nlohmann::json loss_scaler;   // LossScaler::state(), or null
  nlohmann::json lr_scheduler;  // LrSchedule::state(), or null
  nlohmann::json data;          // a rank's MicroBatchIterator::state(), or null
  std::string model_config_json{};  // the model's HF config.json text (rank 0's is saved), or empty
  int saved_world_size = 0;     // filled by load_engine_checkpoint
};

// Saves checkpoint "global_step<iteration>" under `dir` and points DIR/latest at it. A collective:
// every rank calls it with its own extras (loss_scaler, lr_scheduler and model_config_json are
// taken from rank 0; the config makes `tierzero convert` write OUT/config.json). The checkpoint is
// durable when it returns ok on every rank; a failure on any rank fails all.
Status save_engine_checkpoint(const std::string& dir, ZeroEngine& engine, const CheckpointExtras& extras);

// Loads the checkpoint DIR/latest names into `engine` (master weights, moments, Adam step count,
// compute weights) and returns the extras, `data` being this rank's saved position when the
// world size is unchanged, else rank 0's. A collective. Errors name the directory and the
// mismatch (stage, parameter names or shapes).
Result<CheckpointExtras> load_engine_checkpoint(const std::string& dir, ZeroEngine& engine);

// Makes `status` the same on every rank of `comm`: a rank's own error when it failed, else an
// internal error saying `what` failed on another rank (see its log). A collective.
Status agree_across_ranks(Comm& comm, const Status& status, const std::string& what);

}  // namespace tierzero::engine
