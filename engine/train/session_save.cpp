#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/engine_format/engine_checkpoint.h"
#include "engine/train/internal/checkpoint_rotation.h"
#include "engine/train/internal/engine_options.h"
#include "engine/train/internal/output_preflight.h"
#include "engine/train/internal/session.h"
#include "engine/train/internal/write_behind.h"
#include "fs/file_system.h"

namespace tierzero::engine::trainer {
namespace {

constexpr uint64_t kMetricsLineBytes = 2048;    // a step's metrics line (or TensorBoard event), rounded up
constexpr uint64_t kTraceBytes = 256ull << 20;  // --profile: one step's events (a 14B step: ~100k events)

// True when paths `a` and `b` name the same existing directory.
bool same_directory(const std::string& a, const std::string& b) {
  char real_a[PATH_MAX], real_b[PATH_MAX];
  return realpath(a.c_str(), real_a) != nullptr && realpath(b.c_str(), real_b) != nullptr &&
         std::strcmp(real_a, real_b) == 0;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Bytes of the regular files below `path` (0 where it cannot be read: the figure is a report).
uint64_t directory_bytes(const std::string& path) {
  std::error_code error;
  uint64_t bytes = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(path, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error))
    if (it->is_regular_file(error)) bytes += it->file_size(error);
  return bytes;
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

Status TrainingSession::check_outputs(const Plan& plan) {
  std::vector<OutputDestination> outputs;
  if (!args_.save_dir.empty()) {
    std::string what;
    uint64_t bytes = planned_checkpoint_bytes(plan, what);
    // Periodic saves: the newest durable checkpoint stays while the next is written, so a run holds
    // several at once (counted from step 0: a resumed run saves no more than that).
    const int64_t periodic = save_every_ > 0 ? (last_step_ - 1) / save_every_ : 0;
    const auto existing = static_cast<int64_t>(saved_iterations(args_.save_dir).size());
    const int64_t at_once = checkpoints_added_at_once(existing, periodic + 1, keep_last_);
    if (at_once > 1) {
      bytes *= static_cast<uint64_t>(at_once);
      what = std::to_string(at_once) + " checkpoints at once (--save-every " + std::to_string(save_every_) +
             (keep_last_ > 0 ? ", --keep-last " + std::to_string(keep_last_) : ", all kept") +
             ": the newest durable one stays while the next is written; fewer with --keep-last, or save at the "
             "end only), each " +
             what;
    }
    if (config_.config.zero.gather_16bit_weights_on_model_save && !config_.config.tierzero.lora) {  // LoRA: adapters
      std::string model_what;
      bytes += planned_export_bytes(plan, num_parameters(model_.config), model_what);
      what += " + " + model_what + " (stage3_gather_16bit_weights_on_model_save)";
    }
    outputs.push_back(OutputDestination{.path = args_.save_dir,
                                        .what = "--save",
                                        .kind = OutputKind::kDirectory,
                                        .planned_bytes = bytes,
                                        .planned_what = what});
  }
  if (printer() && !args_.export_dir.empty()) {
    std::string what;
    const uint64_t bytes = planned_export_bytes(plan, num_parameters(model_.config), what);
    outputs.push_back(OutputDestination{.path = args_.export_dir,
                                        .what = "--export",
                                        .kind = OutputKind::kStagedBeside,
                                        .planned_bytes = bytes,
                                        .planned_what = what});
  }
  if (printer() && !args_.metrics_path.empty()) {
    outputs.push_back(OutputDestination{.path = args_.metrics_path,
                                        .what = "--metrics",
                                        .kind = OutputKind::kFile,
                                        .planned_bytes = static_cast<uint64_t>(last_step_ + 1) * kMetricsLineBytes,
                                        .planned_what = "a JSON line per step"});
  }
  if (printer() && !args_.profile_path.empty()) {
    outputs.push_back(OutputDestination{.path = args_.profile_path,
                                        .what = "--profile",
                                        .kind = OutputKind::kFile,
                                        .planned_bytes = kTraceBytes,
                                        .planned_what = "a Chrome trace of one step"});
  }
  if (printer() && !args_.tensorboard_dir.empty()) {
    outputs.push_back(OutputDestination{.path = args_.tensorboard_dir,
                                        .what = "--tensorboard",
                                        .kind = OutputKind::kDirectory,
                                        .planned_bytes = static_cast<uint64_t>(last_step_ + 1) * kMetricsLineBytes,
                                        .planned_what = "an event per step"});
  }
  // The swap files' bytes (the planner's NVMe peak, every rank of the host), spread over the paths.
  const std::vector<std::string> swap_dirs = config_nvme_paths(config_.config);
  uint64_t swap_bytes = 0;
  for (const TierCheck& check : plan.checks)
    if (check.name == "nvme") swap_bytes = check.peak_bytes;
  for (const std::string& dir : swap_dirs)
    outputs.push_back(OutputDestination{.path = dir,
                                        .what = "nvme_path",
                                        .kind = OutputKind::kSwapDirectory,
                                        .planned_bytes = swap_bytes / swap_dirs.size(),
                                        .planned_what = "NVMe swap files, the planner's peak"});

  Status status;
  if (printer() && !args_.save_dir.empty()) {
    Result<std::vector<std::string>> removed = remove_unfinished_saves(args_.save_dir);
    status = removed.status();
    for (const std::string& path : removed.ok() ? *removed : std::vector<std::string>{})
      std::fprintf(stderr,
                   "removed %s: what an earlier save that failed or was killed left (never a committed "
                   "checkpoint)\n",
                   path.c_str());
  }
  if (status.ok()) {
    const std::string probe_tag = "rank" + std::to_string(comm_->rank());
    status = check_output_destinations(outputs, probe_tag, fs::default_file_system());
  }
  return agree_across_ranks(*comm_, status, "checking the output destinations");
}

Status TrainingSession::allocate_save_buffers(const Plan& plan) {
  std::string what;
  const uint64_t checkpoint = planned_checkpoint_bytes(plan, what);
  const int world = comm_->world_size();
  // Stage 0: rank 0 stores the whole state.
  const uint64_t rank_bytes = plan.stage == 0 ? checkpoint : checkpoint / static_cast<uint64_t>(world);
  const WriteBehind choice =
      choose_write_behind(config_.config.tierzero.checkpoint_write_behind, rank_bytes, mem_available_bytes(), world);
  const auto start = std::chrono::steady_clock::now();
  Result<std::unique_ptr<checkpoint::WriteBuffers>> buffers = checkpoint::WriteBuffers::create(choice.bytes);
  TZ_RETURN_IF_ERROR(agree_across_ranks(*comm_, buffers.status(), "allocating the checkpoint write-behind buffers"));
  save_buffers_ = std::move(*buffers);
  save_buffers_line_ = fmt::format(
      "periodic saves: write-behind {} per rank ({}), the state copied that far ahead of the disk; allocated in "
      "{:.2f} s",
      format_bytes(save_buffers_->bytes()), choice.why, seconds_since(start));
  return Status();
}

Status TrainingSession::save(int64_t iteration) {
  const Status status = write_checkpoint(iteration);
  return status.ok() ? status : after_failed_save(iteration, status);
}

Status TrainingSession::after_failed_save(int64_t iteration, const Status& failure) {
  const std::string& dir = args_.save_dir;
  // Every rank is past the failed save (its status agreed): rank 0 removes what it staged.
  std::string cleanup = "its partial output was removed";
  if (printer()) {
    const Result<std::vector<std::string>> removed = remove_unfinished_saves(dir);
    if (!removed.ok()) cleanup = "its partial output could not all be removed: " + removed.status().message();
  }
  const std::string tag = latest_tag(dir);
  const std::string kept = tag.empty() ? "no checkpoint was saved before it"
                                       : dir + "/" + tag + " (the one " + dir + "/latest names) is kept as it was";
  const bool periodic = iteration < last_step_;
  if (periodic && args_.on_save_error == SaveErrorPolicy::kContinue) {
    const int64_t next = (iteration / save_every_ + 1) * save_every_;
    const std::string retry = next < last_step_ ? "the next save is at step " + std::to_string(next)
                                                : "the final save at step " + std::to_string(last_step_) + " follows";
    if (printer())
      std::fprintf(stderr,
                   "warning: the save of step %lld into %s failed: %s\n  training continues: %s; %s; %s "
                   "(--on-save-error stop ends the run instead)\n",
                   static_cast<long long>(iteration), dir.c_str(), failure.message().c_str(), kept.c_str(),
                   cleanup.c_str(), retry.c_str());
    return Status();
  }
  return Status(failure.code(), (periodic ? "the periodic save of step " : "the final save of step ") +
                                    std::to_string(iteration) + " into " + dir + " failed: " + failure.message() +
                                    ". Kept: " + kept + "; " + cleanup);
}

Status TrainingSession::write_checkpoint(int64_t iteration) {
  const std::string& dir = args_.save_dir;
  wait_for_removal();
  // Resumed from this directory's latest tierzero checkpoint with no step since (a run restarted
  // after its last save): that checkpoint is this state, and re-saving its tag is refused
  // (checkpoints are immutable). Only a move of `latest` a kill stopped halfway is finished.
  const bool saved_already =
      iteration == first_step_ && same_directory(args_.resume_dir, dir) && checkpoint::is_engine_checkpoint(dir);
  const bool with_model = lora_ != nullptr || config_.config.zero.gather_16bit_weights_on_model_save;
  const auto start = std::chrono::steady_clock::now();
  std::optional<report::SaveMetrics> saved;
  if (saved_already) {
    if (printer()) TZ_RETURN_IF_ERROR(checkpoint::complete_latest(dir));
  } else if (iteration < last_step_ && !with_model) {
    // A periodic save streams out while the next steps run; committed once written (commit_written_save).
    TZ_ASSIGN_OR_RETURN(pending_save_,
                        BackgroundSave::start(dir, *engine_, extras(iteration),
                                              checkpoint_compression_level(config_.config), save_buffers_.get()));
    pending_iteration_ = iteration;
    pending_start_ = start;
    return Status();
  } else {
    TZ_RETURN_IF_ERROR(save_engine_checkpoint(dir, *engine_, extras(iteration),
                                              checkpoint_compression_level(config_.config), save_buffers_.get()));
    saved.emplace();
    saved->step = iteration;
    saved->durable_s = seconds_since(start);
    saved->committed_after_step = iteration;
  }
  if (lora_ != nullptr) {
    TZ_RETURN_IF_ERROR(save_lora_adapter(dir));  // as the HF Trainer saves a PEFT model's checkpoint
  } else if (config_.config.zero.gather_16bit_weights_on_model_save) {
    TZ_RETURN_IF_ERROR(save_16bit_model(*engine_, model_.config_json, dir, {.companion_dirs = {args_.model_dir}}));
  }
  return saved_checkpoint(iteration, saved, "");
}

Status TrainingSession::commit_written_save(int64_t step) {
  if (pending_save_ == nullptr || !pending_save_->written()) return Status();
  return finish_save(step, /*waited=*/false);
}

Status TrainingSession::finish_save(int64_t through_step, bool waited) {
  if (pending_save_ == nullptr) return Status();
  const std::unique_ptr<BackgroundSave> save = std::move(pending_save_);
  const auto finish_start = std::chrono::steady_clock::now();
  Status status = save->finish();
  if (status.ok()) {
    const report::SaveMetrics saved{.step = pending_iteration_,
                                    .durable_s = seconds_since(pending_start_),
                                    .background = true,
                                    .committed_after_step = through_step,
                                    .write_s = save->write_seconds(),
                                    .held_s = save->held_seconds()};
    const int64_t first = pending_iteration_ + 1;
    std::string note = first == through_step ? fmt::format(" (written during step {}", first)
                                             : fmt::format(" (written during steps {} to {}", first, through_step);
    note += fmt::format("; its optimizer waited {:.3f} s for it", save->held_seconds());
    if (waited) note += fmt::format("; the run waited {:.3f} s for its write and commit", seconds_since(finish_start));
    status = saved_checkpoint(pending_iteration_, saved, note + ")");
  }
  return status.ok() ? status : after_failed_save(pending_iteration_, status);
}

Status TrainingSession::saved_checkpoint(int64_t iteration, std::optional<report::SaveMetrics> saved,
                                         const std::string& note) {
  const std::string& dir = args_.save_dir;
  const std::string path = dir + "/global_step" + std::to_string(iteration);
  if (!printer()) return Status();
  if (saved) {
    saved->bytes = static_cast<int64_t>(directory_bytes(path));
    // The rate is the save's own: a background save's files were done before the step it ran beside.
    const double seconds = saved->write_s.value_or(saved->durable_s);
    char figures[160];
    std::snprintf(figures, sizeof(figures), ": %s, durable %.2f s after it began; written at %s",
                  format_bytes(static_cast<uint64_t>(saved->bytes)).c_str(), saved->durable_s,
                  format_rate(static_cast<double>(saved->bytes) / std::max(seconds, 1e-9)).c_str());
    std::string line = "  saved " + path + note + figures;
    if (saved->write_s) {
      std::snprintf(figures, sizeof(figures), " (its files in %.2f s)", *saved->write_s);
      line += figures;
    }
    print_line(line);
    TZ_RETURN_IF_ERROR(metrics_.write_save(*saved));
  } else if (iteration < last_step_) {
    print_line("  saved " + path + note);
  }
  if (keep_last_ <= 0) return Status();
  // The new checkpoint is durable on every rank (the save agreed); a failed clean-up loses no state.
  wait_for_removal();
  const Status retired = retire_old_checkpoints(dir, keep_last_);
  if (!retired.ok()) {
    print_line("warning: keeping older checkpoints: " + retired.to_string());
    return Status();
  }
  // Unlinking a checkpoint's GBs takes seconds where the file system discards as it frees: beside the steps.
  removal_ = std::async(std::launch::async, [dir] { return remove_retired_checkpoints(dir); });
  return Status();
}

void TrainingSession::wait_for_removal() {
  if (!removal_.valid()) return;
  const Status removed = removal_.get();
  if (!removed.ok()) print_line("warning: an older checkpoint is left to remove: " + removed.to_string());
}

Status TrainingSession::export_model() {
  if (lora_ != nullptr) return export_lora_model();
  TZ_RETURN_IF_ERROR(export_16bit_model(*engine_, model_.config_json, args_.export_dir,
                                        {.progress = printer(), .companion_dirs = {args_.model_dir}}));
  if (printer() && checkpoint::tokenizer_files_in(args_.model_dir).empty()) {
    print_line("  note: " + args_.export_dir + " has no tokenizer files (AutoTokenizer cannot load it): " +
               (args_.model_dir.empty() ? "the model did not come from a --model directory"
                                        : "--model " + args_.model_dir + " holds none") +
               "; copy the tokenizer's files into it");
  }
  return Status();
}

}  // namespace tierzero::engine::trainer
