#include "engine/train/internal/session.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "engine/plan/plan.h"
#include "engine/train/internal/engine_options.h"
#include "engine/train/internal/epochs.h"
#include "engine/train/internal/plan_check.h"

namespace tierzero::engine::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Seconds since this process started (/proc/self/stat's starttime against /proc/uptime), or -1
// where /proc does not say.
double process_seconds() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0.0;
  if (!std::getline(stat, line) || !(uptime >> up)) return -1.0;
  const size_t comm_end = line.rfind(')');  // the command name may hold spaces
  if (comm_end == std::string::npos) return -1.0;
  std::istringstream fields(line.substr(comm_end + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i)  // field 22: starttime, in clock ticks after boot
    if (i == 22) return up - std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return -1.0;
}

// Steps between periodic saves: --save-every, else tierzero.checkpoint.save_every (0: none).
Result<int64_t> save_period(const TrainArgs& args, const DsConfig& config) {
  const int64_t every = args.save_every > 0 ? args.save_every : config.tierzero.checkpoint_save_every;
  if (every > 0 && args.save_dir.empty())
    return invalid_argument("periodic saves (--save-every / tierzero.checkpoint.save_every = " + std::to_string(every) +
                            ") need a directory: pass --save DIR");
  return every;
}

}  // namespace

Result<std::unique_ptr<TrainingSession>> TrainingSession::create(const TrainArgs& args, std::FILE* out) {
  const Clock::time_point start = Clock::now();
  TZ_RETURN_IF_ERROR(check_loop_args(args));
  std::unique_ptr<TrainingSession> s(new TrainingSession(args, out));
  if (args.full_determinism) use_full_determinism();
  s->device_ = pick_device();
  TZ_ASSIGN_OR_RETURN(s->comm_, Comm::from_env(s->device_));
  if (!args.export_dir.empty()) TZ_RETURN_IF_ERROR(check_export_dir(args.export_dir));
  TZ_ASSIGN_OR_RETURN(s->model_, load_model(args));
  s->network_ = make_causal_lm(s->model_.config);
  choose_cpu_threads(s->device_, num_parameters(s->model_.config));

  TrainArgs config_args = args;
  if (args.epochs > 0.0 && args.steps == 0) config_args.steps = 1;  // until the data gives the steps (plan_epochs)
  TZ_ASSIGN_OR_RETURN(s->config_, load_config(config_args, s->comm_->world_size(), s->model_.config));
  const DsConfig& config = s->config_.config;
  TZ_ASSIGN_OR_RETURN(s->data_, open_data(args, s->config_, s->comm_->rank(), s->comm_->world_size()));
  if (args.epochs > 0.0) {
    TZ_RETURN_IF_ERROR(s->plan_epochs());  // reloads config_ with the steps
  } else {
    s->last_step_ = planned_steps(args, config);
  }
  TZ_RETURN_IF_ERROR(s->open_evaluation());
  TZ_RETURN_IF_ERROR(s->open_trace());  // a step past the run's refused before the weights; again after a resume
  TZ_ASSIGN_OR_RETURN(s->options_, engine_options(config));
  TZ_ASSIGN_OR_RETURN(s->save_every_, save_period(args, config));
  s->keep_last_ = args.keep_last >= 0 ? args.keep_last : config.tierzero.checkpoint_keep_last;
  LrScheduleConfig constant_lr{.type = LrScheduleType::kWarmupLR,
                               .warmup_min_lr = config.optimizer.lr,
                               .warmup_max_lr = config.optimizer.lr,
                               .warmup_num_steps = 1};
  TZ_ASSIGN_OR_RETURN(s->schedule_, LrSchedule::create(config.scheduler.value_or(constant_lr)));
  TZ_ASSIGN_OR_RETURN(s->scaler_, LossScaler::create(config.loss_scaler_config()));
  // The planner's check, before the weights and the engine's buffers are allocated. Its GPU peak
  // without a device gradient accumulator or forward window is what the engine's automatic choices add to.
  // It counts the periodic saves' write-behind buffers when the run saves periodically (--save-every too).
  DsConfig planned = config;
  planned.tierzero.checkpoint_save_every = args.save_dir.empty() ? 0 : s->save_every_;
  TZ_ASSIGN_OR_RETURN(const Plan plan,
                      plan_within_budgets(s->model_.config_json, s->model_.description, planned,
                                          s->data_.samples->seq_len(), s->device_, s->model_.from_checkpoint));
  TZ_RETURN_IF_ERROR(s->check_outputs(plan));
  if (s->options_.offload_optimizer) s->options_.planned_gpu_peak_bytes = plan.gpu_allocated_base_bytes;
  s->options_.window_group = plan.window_group;
  s->options_.kept_layers = plan.kept_layers;
  s->options_.micro_batch_tokens = config.batch.train_micro_batch_size_per_gpu * s->data_.samples->seq_len();
  init_random_weights(args, s->model_);
  if (config.tierzero.lora) TZ_RETURN_IF_ERROR(s->adapt_model());

  const double before_engine = seconds_since(start);
  s->engine_ = std::make_unique<ZeroEngine>(*s->network_, *s->model_.weights, s->options_, *s->comm_);
  s->model_.weights.reset();
  const double engine = seconds_since(start) - before_engine;
  s->initial_adapters_.clear();
  if (!args.resume_dir.empty()) TZ_RETURN_IF_ERROR(s->resume());
  if (!args.resume_dir.empty()) TZ_RETURN_IF_ERROR(s->open_trace());
  if (s->save_every_ > 0 && !args.save_dir.empty()) TZ_RETURN_IF_ERROR(s->allocate_save_buffers(plan));

  const int64_t seq_len = s->data_.samples->seq_len();
  s->tokens_per_step_ = config.batch.train_micro_batch_size_per_gpu * config.batch.gradient_accumulation_steps *
                        s->comm_->world_size() * seq_len;
  s->flops_per_step_ = training_flops_per_token(s->model_.config, seq_len, /*weight_grads=*/s->lora_ == nullptr) *
                       static_cast<double>(s->tokens_per_step_);
  TZ_RETURN_IF_ERROR(s->open_metrics());
  const EngineStartup& phases = s->engine_->startup();
  s->startup_ = fmt::format(
      "start-up {:.1f} s since the process started: model, config and data {:.1f} s, engine {:.1f} s (weights {} "
      "{:.1f} s, {:.2f} GB as fp32, {:.2f} GB/s on {:.1f} cores busy; besides them: pinned buffers {:.1f} s, set-up "
      "{:.1f} s, 16-bit parameters {:.1f} s, optimizer state {:.1f} s)",
      process_seconds(), before_engine, engine, s->model_.from_checkpoint ? "read" : "drawn", phases.weights_s,
      static_cast<double>(phases.weight_bytes) / 1e9,
      static_cast<double>(phases.weight_bytes) / 1e9 / std::max(phases.weights_s, 1e-9),
      phases.weights_cpu_s / std::max(phases.weights_s, 1e-9), phases.pinned_s, phases.setup_s, phases.params_s,
      phases.optimizer_s);
  return s;
}

Status TrainingSession::open_trace() {
  if (args_.profile_path.empty() || !printer()) return Status();
  const int64_t step = args_.profile_step > 0 ? args_.profile_step : std::min(first_step_ + 2, last_step_);
  if (step <= first_step_ || step > last_step_)
    return invalid_argument(fmt::format("--profile-step {}: this run takes steps {} to {}; pass one of them", step,
                                        first_step_ + 1, last_step_));
  trace_ = std::make_unique<StepTrace>(args_.profile_path, step, device_);
  return Status();
}

Status TrainingSession::resume() {
  TZ_ASSIGN_OR_RETURN(CheckpointExtras saved, load_engine_checkpoint(args_.resume_dir, *engine_));
  first_step_ = saved.iteration;
  if (!saved.loss_scaler.is_null()) TZ_RETURN_IF_ERROR(scaler_->load_state(saved.loss_scaler));
  if (!saved.lr_scheduler.is_null()) TZ_RETURN_IF_ERROR(schedule_->load_state(saved.lr_scheduler));
  return restore_data_position(saved, *data_.batches, comm_->world_size(),
                               config_.config.batch.train_micro_batch_size_per_gpu);
}

Result<TrainSummary> TrainingSession::run() {
  print_header();
  TrainSummary summary;
  RunTotals totals;
  const auto run_start = std::chrono::steady_clock::now();
  for (int64_t step = first_step_; step < last_step_; ++step) {
    if (trace_) trace_->before(step + 1);
    TZ_ASSIGN_OR_RETURN(StepRecord record, run_step(step));
    if (trace_ && record.step == trace_->step()) engine_->finish_step();  // the trace holds its optimizer whole
    if (trace_) TZ_RETURN_IF_ERROR(trace_->after(record.step));
    TZ_RETURN_IF_ERROR(commit_written_save(record.step));  // the save the steps ran beside, if written: durable
    if (summary.steps == 0) summary.first_loss = record.loss;
    summary.last_loss = record.loss;
    summary.losses.push_back(record.loss);
    ++summary.steps;
    summary.skipped_steps += record.overflow;
    totals.peak = summary.steps == 1 ? record.memory : max_of(totals.peak, record.memory);
    if (should_print(record.step, first_step_, last_step_, config_.config.steps_per_print))
      print_line(format_step_line(record));
    if (trace_ && record.step == trace_->step())
      print_line(fmt::format("  profile: step {} traced into {} (open it in ui.perfetto.dev or chrome://tracing)",
                             record.step, trace_->path()));
    TZ_RETURN_IF_ERROR(metrics_.write(record, totals.peak.gpu_peak_bytes));
    if (eval_due(record.step)) TZ_RETURN_IF_ERROR(evaluate(record.step, summary));
    if (save_due(record.step)) {
      TZ_RETURN_IF_ERROR(finish_save(record.step));  // one save at a time: the last one's write ends first
      TZ_RETURN_IF_ERROR(save(record.step));
    }
  }
  TZ_RETURN_IF_ERROR(finish_save(last_step_));  // none is left in flight (a save is never due at the last step)
  engine_->finish_step();  // the last step's optimizer may still run (and fail): its time counts too
  if (evaluator_ && (summary.evals.empty() || summary.evals.back().step != last_step_))
    TZ_RETURN_IF_ERROR(evaluate(last_step_, summary));
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count() -
                    eval_seconds_;  // training time: the evaluations are not part of it
  summary.epochs = epochs_done(*data_.batches);
  const double seconds = std::max(summary.seconds, 1e-9);
  summary.tokens_per_second = static_cast<double>(summary.steps * tokens_per_step_) / seconds;
  summary.gpu_peak_bytes = totals.peak.gpu_peak_bytes;
  summary.pinned_bytes = totals.peak.pinned_bytes;
  summary.pageable_bytes = totals.peak.pageable_bytes;

  if (!args_.save_dir.empty()) {
    TZ_RETURN_IF_ERROR(save(last_step_));
    wait_for_removal();
    totals.saved_to = args_.save_dir;
  }
  if (!args_.export_dir.empty()) {
    TZ_RETURN_IF_ERROR(export_model());
    totals.exported_to = args_.export_dir;
  }
  totals.steps = summary.steps;
  totals.skipped_steps = summary.skipped_steps;
  totals.seconds = summary.seconds;
  totals.first_loss = summary.first_loss;
  totals.last_loss = summary.last_loss;
  totals.tokens_per_s = summary.tokens_per_second;
  totals.tflops = static_cast<double>(summary.steps) * flops_per_step_ / seconds / 1e12;
  totals.epochs = summary.epochs;
  if (!summary.evals.empty()) totals.eval_loss = summary.evals.back().loss;
  print_line(format_done_line(totals));
  return summary;
}

}  // namespace tierzero::engine::trainer
