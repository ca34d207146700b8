#include <climits>
#include <cstdlib>
#include <cstring>

#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/train/internal/checkpoint_rotation.h"
#include "engine/train/internal/engine_options.h"
#include "engine/train/internal/session.h"

namespace tierzero::engine::trainer {
namespace {

// True when paths `a` and `b` name the same existing directory.
bool same_directory(const std::string& a, const std::string& b) {
  char real_a[PATH_MAX], real_b[PATH_MAX];
  return realpath(a.c_str(), real_a) != nullptr && realpath(b.c_str(), real_b) != nullptr &&
         std::strcmp(real_a, real_b) == 0;
}

}  // namespace

bool TrainingSession::save_due(int64_t iteration) const {
  return save_every_ > 0 && iteration % save_every_ == 0 && iteration < last_step_;
}

CheckpointExtras TrainingSession::extras(int64_t iteration) const {
  return CheckpointExtras{.iteration = iteration,
                          .loss_scaler = scaler_->state(),
                          .lr_scheduler = schedule_->state(),
                          .data = data_.batches->state(),
                          .model_config_json = model_.config_json};
}

Status TrainingSession::save(int64_t iteration) {
  const std::string& dir = args_.save_dir;
  // Resumed from this directory's latest tierzero checkpoint with no step since (a run restarted
  // after its last save): that checkpoint is this state, and re-saving its tag is refused
  // (checkpoints are immutable). Only a move of `latest` a kill stopped halfway is finished.
  const bool saved_already =
      iteration == first_step_ && same_directory(args_.resume_dir, dir) && checkpoint::is_engine_checkpoint(dir);
  if (saved_already) {
    if (printer()) TZ_RETURN_IF_ERROR(checkpoint::complete_latest(dir));
  } else {
    TZ_RETURN_IF_ERROR(
        save_engine_checkpoint(dir, *engine_, extras(iteration), checkpoint_compression_level(config_.config)));
  }
  if (config_.config.zero.gather_16bit_weights_on_model_save)
    TZ_RETURN_IF_ERROR(save_16bit_model(*engine_, model_.config_json, dir));
  if (printer() && iteration < last_step_) print_line("  saved " + dir + "/global_step" + std::to_string(iteration));
  if (!printer() || keep_last_ <= 0) return Status();
  // The new checkpoint is durable on every rank (the save agreed); a failed clean-up loses no state.
  Status removed = remove_old_checkpoints(dir, keep_last_);
  if (!removed.ok()) print_line("warning: keeping older checkpoints: " + removed.to_string());
  return Status();
}

Status TrainingSession::export_model() {
  return export_16bit_model(*engine_, model_.config_json, args_.export_dir, {.progress = printer()});
}

}  // namespace tierzero::engine::trainer
