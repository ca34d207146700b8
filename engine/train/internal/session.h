// Private: one training run on this rank, as a small object (the pieces of `tierzero train`):
//
//   create()      session.cpp         device, process group, model, ds_config -> engine options,
//                                     data, schedules, the planner's budget check (plan_check.h),
//                                     weights, engine; resume from --resume
//   run()         session.cpp         header, then for each step: run_step(), report it, save when due;
//                                     then the final save / export and the `done:` line
//   run_step()    session_step.cpp    one optimizer step (below) and its measured figures
//   check_outputs() session_save.cpp  before any weight is allocated: unfinished saves removed, every
//                                     output destination created, probed and its free space checked
//                                     (output_preflight.h)
//   save()        session_save.cpp    an engine checkpoint (+ the 16-bit model when asked), older
//                                     checkpoints removed once it is durable; a failed one cleaned up
//                                     and, when periodic, survived (--on-save-error); a periodic one
//                                     streams out during the next steps (ahead of the disk into the
//                                     write-behind buffers, write_behind.h) and is committed at the end
//                                     of the first step its write has ended by on every rank
//                                     (commit_written_save(), finish_save()); the export
//   print_*()     session_report.cpp  rank 0's header and lines (format in step_report.h), and the
//                                     metrics JSONL (--metrics, metrics_log.h)
//   plan_epochs() session_eval.cpp    --epochs: the steps the data's size gives (epochs.h)
//   evaluate()    session_eval.cpp    the held-out evaluation (evaluation.h): every --eval-every steps
//                                     and after the last, printed, logged and kept in the summary
//
// The step, as every rank runs it:
//   for each of gradient_accumulation_steps micro-batches of this rank's data:
//       loss += engine.queue_forward_backward(ids, targets, loss_scale / accumulation_steps)  // on the device
//                                                         // (read once, after the step: no wait per micro-batch)
//   outcome = engine.step(lr, loss_scale)       // fp16 overflow: skipped, gradients dropped
//   loss_scaler.update(outcome.overflow);  if not overflow: lr_schedule.step()
#pragma once

#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <string>

#include "checkpoint/storage/storage.h"
#include "common/common.h"
#include "engine/comm/comm.h"
#include "engine/model/functional_model.h"
#include "engine/optim/schedules.h"
#include "engine/plan/plan.h"
#include "engine/train/internal/evaluation.h"
#include "engine/train/internal/metrics_log.h"
#include "engine/train/internal/run_setup.h"
#include "engine/train/internal/step_report.h"
#include "engine/train/internal/step_trace.h"
#include "engine/train/trainer.h"
#include "engine/zero/zero_engine.h"

namespace tierzero::engine::trainer {

class TrainingSession {
 public:
  // Sets up the run `args` describe on this rank (every rank calls it; it is a collective when
  // resuming). Rank 0 writes to `out`. Errors name the file or key and the fix.
  static Result<std::unique_ptr<TrainingSession>> create(const TrainArgs& args, std::FILE* out);

  // Runs the steps left, saves and exports as asked, and returns the summary. A collective.
  Result<TrainSummary> run();

 private:
  TrainingSession(const TrainArgs& args, std::FILE* out) : args_(args), out_(out) {}
  Status resume();
  // --profile: trace_ for --profile-step (default the second step this run takes), rank 0; a step
  // outside this run's is kInvalidArgument naming them. Called once the last step is known and again
  // after a resume (which moves the first).
  Status open_trace();
  // kInvalidArgument for --epochs, --eval-data, --eval-fraction and --eval-every values or
  // combinations that cannot run (before anything is loaded).
  static Status check_loop_args(const TrainArgs& args);
  Status plan_epochs();
  Status open_evaluation();
  // The run header's epochs line: the steps, the epochs they are, and how often a sample is seen.
  std::string epochs_summary() const;
  bool eval_due(int64_t step) const;
  Status evaluate(int64_t step, TrainSummary& summary);
  Status open_metrics();
  Result<StepRecord> run_step(int64_t step);
  Status check_outputs(const Plan& plan);
  bool save_due(int64_t iteration) const;
  Status save(int64_t iteration);
  Status write_checkpoint(int64_t iteration);
  // Periodic saves' write-behind buffers (tierzero.checkpoint.write_behind, resolved against the
  // planner's checkpoint bytes and MemAvailable now), allocated once for the run; a line for the
  // header. A collective; an allocation that fails on any rank is an error naming the key.
  Status allocate_save_buffers(const Plan& plan);
  // After step `step`: commits the pending save when every rank's write has ended (a collective
  // check that does not wait for the disk).
  Status commit_written_save(int64_t step);
  // The periodic save streaming out (if any), written during the steps up to `through_step`: waited
  // for and committed, then saved_checkpoint(); a failure goes through after_failed_save. `waited`:
  // the write had not ended when called (the line says how long the run waited for it).
  Status finish_save(int64_t through_step, bool waited = true);
  // What follows a durable checkpoint of `iteration`: the "saved" line and, for one this run wrote
  // (`saved`: its times; its bytes are counted here), the metrics' save line; older checkpoints
  // retired (renamed away) now and their files removed beside the next steps (removal_).
  Status saved_checkpoint(int64_t iteration, std::optional<report::SaveMetrics> saved, const std::string& note);
  // Waits for the retired checkpoints' removal, if one runs; a failure is a warning (a leftover
  // global_stepN.removing, removed by the next rotation). Before a save writes (the disk holds no
  // more checkpoints at once than check_outputs planned) and at the run's end.
  void wait_for_removal();
  Status after_failed_save(int64_t iteration, const Status& failure);
  Status export_model();
  // tierzero.lora (session_lora.cpp): network_ becomes a LoraModel over the frozen base and
  // model_.weights a source over its initial adapters; a PEFT adapter directory into `dir`; the
  // merged model into --export.
  Status adapt_model();
  Status save_lora_adapter(const std::string& dir);
  Status export_lora_model();
  // The run header's LoRA line: rank, scaling, adapted projections, trainable and frozen sizes.
  std::string lora_summary() const;
  CheckpointExtras extras(int64_t iteration) const;
  bool printer() const { return comm_->rank() == 0; }
  void print_header() const;
  void print_line(const std::string& line) const;

  const TrainArgs args_;
  std::FILE* out_;
  at::Device device_{at::kCPU};
  std::unique_ptr<Comm> comm_;
  ModelAndWeights model_;
  std::unique_ptr<FunctionalModel> network_;
  LoraModel* lora_ = nullptr;                           // network_ when tierzero.lora is set
  std::map<std::string, at::Tensor> initial_adapters_;  // what model_.weights reads for a LoRA run
  LoadedConfig config_;
  ZeroEngineOptions options_;
  TrainingData data_;
  std::optional<Evaluator> evaluator_;  // with --eval-data / --eval-fraction
  double eval_seconds_ = 0.0;           // wall time of this run's evaluations
  std::optional<LrSchedule> schedule_;
  std::optional<LossScaler> scaler_;
  std::unique_ptr<ZeroEngine> engine_;
  // The saves' staging buffers (null: no periodic saves); declared before pending_save_, whose writer
  // uses them until it is destroyed.
  std::unique_ptr<checkpoint::WriteBuffers> save_buffers_;
  std::string save_buffers_line_;                        // the header's line about them
  std::unique_ptr<BackgroundSave> pending_save_;         // a periodic save the next steps run beside (reads engine_)
  int64_t pending_iteration_ = 0;                        // its iteration
  std::chrono::steady_clock::time_point pending_start_;  // when it began
  std::future<Status> removal_;                          // rank 0: the retired checkpoints' files being removed, if any
  MetricsLog metrics_;
  int64_t first_step_ = 0;            // steps done before this run (resume)
  int64_t last_step_ = 0;             // the step the run ends after
  int64_t save_every_ = 0;            // 0: save at the end only
  int64_t keep_last_ = 0;             // checkpoints kept in args_.save_dir; 0: all
  std::unique_ptr<StepTrace> trace_;  // --profile, rank 0
  int64_t tokens_per_step_ = 0;
  double flops_per_step_ = 0.0;
  std::string startup_;  // the header's start-up line: where the time before the first step went
};

}  // namespace tierzero::engine::trainer
