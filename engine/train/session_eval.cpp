// The session's held-out evaluation (internal/evaluation.h) and --epochs (internal/epochs.h).
#include <fmt/format.h>

#include "engine/train/internal/epochs.h"
#include "engine/train/internal/session.h"

namespace tierzero::engine::trainer {

Status TrainingSession::check_loop_args(const TrainArgs& args) {
  if (!(args.epochs >= 0.0))
    return invalid_argument(fmt::format("--epochs {} is not a positive number of passes over the data", args.epochs));
  if (!(args.eval_fraction >= 0.0 && args.eval_fraction < 1.0))
    return invalid_argument(fmt::format("--eval-fraction {} is outside (0, 1): give the share of the training "
                                        "data's samples to hold out for evaluation, e.g. 0.05",
                                        args.eval_fraction));
  if (!args.eval_data_path.empty() && args.eval_fraction > 0.0)
    return invalid_argument("--eval-data and --eval-fraction both name the eval set: pass one of them");
  if (args.eval_every < 0)
    return invalid_argument(fmt::format("--eval-every {} is negative: give a number of steps >= 1", args.eval_every));
  if (args.eval_every > 0 && args.eval_data_path.empty() && args.eval_fraction == 0.0)
    return invalid_argument(fmt::format("--eval-every {} has nothing to evaluate: pass --eval-data FILE or "
                                        "--eval-fraction F (e.g. 0.05 of the training data)",
                                        args.eval_every));
  if (args.profile_step < 0 || (args.profile_step > 0 && args.profile_path.empty()))
    return invalid_argument(fmt::format("--profile-step {} needs --profile FILE (the trace's path) and a step >= 1",
                                        args.profile_step));
  return Status();
}

Status TrainingSession::plan_epochs() {
  const int64_t accumulation = config_.config.batch.gradient_accumulation_steps;
  const int64_t steps = steps_for_epochs(args_.epochs, data_.batches->micro_batches_per_epoch(), accumulation);
  if (args_.steps > 0 && args_.steps != steps)
    return invalid_argument(fmt::format(
        "--epochs {} and --steps {} disagree: {} epochs of {} ({} micro-batches of {} samples per rank and epoch, {} "
        "a step) are {} steps; pass one of the two",
        args_.epochs, args_.steps, args_.epochs, data_.path, data_.batches->micro_batches_per_epoch(),
        config_.config.batch.train_micro_batch_size_per_gpu, accumulation, steps));
  TrainArgs with_steps = args_;
  with_steps.steps = steps;  // fills the scheduler's total_num_steps as --steps would
  TZ_ASSIGN_OR_RETURN(config_, load_config(with_steps, comm_->world_size(), model_.config));
  last_step_ = steps;
  return Status();
}

Status TrainingSession::open_evaluation() {
  std::shared_ptr<const SampleSource> samples;
  std::string path;
  if (!args_.eval_data_path.empty()) {
    path = resolve_path(args_.eval_data_path);
    const DsConfig& config = config_.config;
    std::optional<TokenDtype> token_dtype;
    if (!config.tierzero.data_dtype.empty()) {
      TZ_ASSIGN_OR_RETURN(token_dtype, parse_token_dtype(config.tierzero.data_dtype));
    }
    TZ_ASSIGN_OR_RETURN(samples, open_samples(path, data_.samples->seq_len(), token_dtype, args_.model_dir));
  } else if (data_.held_out) {
    samples = data_.held_out;
    path = data_.path + " (held out)";
  } else {
    return Status();
  }
  TZ_ASSIGN_OR_RETURN(evaluator_, Evaluator::create(std::move(samples), std::move(path),
                                                    config_.config.batch.train_micro_batch_size_per_gpu,
                                                    comm_->rank(), comm_->world_size(), model_.config.vocab_size));
  return Status();
}

std::string TrainingSession::epochs_summary() const {
  const MicroBatchIterator& data = *data_.batches;
  const int64_t accumulation = config_.config.batch.gradient_accumulation_steps;
  const double epochs = static_cast<double>(last_step_ * accumulation) / static_cast<double>(data.micro_batches_per_epoch());
  return fmt::format("epochs: {}{} step{} ({} micro-batches of {} samples per rank an epoch, {} a step) = {:.2f} "
                     "epochs: {}",
                     args_.epochs > 0.0 ? fmt::format("--epochs {} -> ", args_.epochs) : "", last_step_,
                     last_step_ == 1 ? "" : "s", data.micro_batches_per_epoch(), data.micro_batch_size(), accumulation,
                     epochs, times_seen(epochs));
}

bool TrainingSession::eval_due(int64_t step) const {
  return evaluator_ && args_.eval_every > 0 && step % args_.eval_every == 0;
}

Status TrainingSession::evaluate(int64_t step, TrainSummary& summary) {
  TZ_ASSIGN_OR_RETURN(EvalResult result, evaluator_->run(*engine_, step));
  eval_seconds_ += result.seconds;
  result.epoch = epochs_done(*data_.batches);
  print_line(format_eval_line(result, last_step_));
  TZ_RETURN_IF_ERROR(metrics_.write_eval(result));
  summary.evals.push_back(
      EvalPoint{.step = step, .loss = result.loss, .perplexity = result.perplexity, .tokens = result.tokens});
  return Status();
}

}  // namespace tierzero::engine::trainer
