#include <ATen/Parallel.h>

#include <cstdlib>

#include "engine/train/internal/engine_options.h"
#include "engine/train/internal/session.h"

namespace tierzero::engine::trainer {

void TrainingSession::print_line(const std::string& line) const {
  if (!printer()) return;
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void TrainingSession::print_header() const {
  if (!printer()) return;
  const DsConfig& config = config_.config;
  const ModelConfig& model = model_.config;
  const int world = comm_->world_size();
  const int threads = at::get_num_threads();
  const int64_t micro_batch = config.batch.train_micro_batch_size_per_gpu;
  const int64_t accumulation = config.batch.gradient_accumulation_steps;
  for (const std::string& warning : config.warnings) std::fprintf(out_, "warning: %s\n", warning.c_str());
  std::fprintf(out_, "tierzero train: %s, %lld parameters (%lld layers, hidden %lld)\n", model_.description.c_str(),
               static_cast<long long>(num_parameters(model)), static_cast<long long>(model.num_hidden_layers),
               static_cast<long long>(model.hidden_size));
  std::fprintf(out_, "  data %s: %lld samples of %lld tokens | config %s\n", data_.path.c_str(),
               static_cast<long long>(data_.samples->size()), static_cast<long long>(data_.samples->seq_len()),
               config_.path.c_str());
  std::fprintf(out_, "  %s\n", epochs_summary().c_str());
  if (evaluator_) {
    const std::string when =
        args_.eval_every > 0 ? "every " + std::to_string(args_.eval_every) + " steps and at the end" : "at the end";
    std::fprintf(out_, "  eval %s: %lld samples, %lld target tokens, %s\n", evaluator_->path().c_str(),
                 static_cast<long long>(evaluator_->samples()), static_cast<long long>(evaluator_->target_tokens()),
                 when.c_str());
  }
  std::fprintf(out_,
               "  ZeRO stage %d, %s, optimizer on %s | %d rank%s (%s) on %s, %d CPU thread%s | batch %lld = %lld x "
               "%lld x %d\n",
               options_.partition.stage, precision_name(config.precision()), engine_->optimizer().placement().c_str(),
               world, world > 1 ? "s" : "", comm_->backend_name().c_str(), device_.str().c_str(), threads,
               threads > 1 ? "s" : "", static_cast<long long>(micro_batch * accumulation * world),
               static_cast<long long>(micro_batch), static_cast<long long>(accumulation), world);
  std::fprintf(out_, "  %s\n", optimizer_summary(config).c_str());
  if (args_.full_determinism)
    std::fprintf(out_, "  full determinism: deterministic algorithms (an op without one is an error), cuDNN "
                       "deterministic, CUBLAS_WORKSPACE_CONFIG=%s\n", std::getenv("CUBLAS_WORKSPACE_CONFIG"));
  if (lora_ != nullptr) std::fprintf(out_, "  %s\n", lora_summary().c_str());
  const std::string state = engine_->optimizer().state_placement();
  if (!state.empty()) std::fprintf(out_, "  optimizer state: %s\n", state.c_str());
  std::fprintf(out_, "  %s\n", startup_.c_str());
  if (!save_buffers_line_.empty()) std::fprintf(out_, "  %s\n", save_buffers_line_.c_str());
  if (!engine_->grad_accumulator_choice().empty())
    std::fprintf(out_, "  offloaded gradients accumulate on the %s\n", engine_->grad_accumulator_choice().c_str());
  if (engine_->follows_step()) {
    std::fprintf(out_, "  the CPU optimizer steps %s; the window runs %s\n", engine_->backward_step_choice().c_str(),
                 engine_->forward_window_choice().c_str());
  } else if (!engine_->forward_window_choice().empty()) {
    std::fprintf(out_, "  the window runs %s\n", engine_->forward_window_choice().c_str());
  }
  if (first_step_ > 0)
    std::fprintf(out_, "  resumed from %s at step %lld\n", args_.resume_dir.c_str(),
                 static_cast<long long>(first_step_));
  std::fflush(out_);
}

Status TrainingSession::open_metrics() {
  if ((args_.metrics_path.empty() && args_.tensorboard_dir.empty()) || !printer()) return Status();
  const DsConfig& config = config_.config;
  std::string offload;
  if (config.zero.offload_optimizer.device != OffloadDevice::kNone)
    offload = std::string("optimizer ") + offload_device_name(config.zero.offload_optimizer.device);
  if (config.zero.offload_param.device != OffloadDevice::kNone)
    offload += (offload.empty() ? "params " : ", params ") +
               std::string(offload_device_name(config.zero.offload_param.device));
  report::RunInfo run;
  run.model = args_.model_dir.empty() ? "builtin" : args_.model_dir;
  run.config = config_.path;
  run.data = data_.path;
  run.world_size = comm_->world_size();
  run.dtype = precision_name(config.precision());
  run.stage = config.zero.stage;
  run.offload = offload.empty() ? "none" : offload;
  run.parameters = num_parameters(model_.config);
  run.tokens_per_step = tokens_per_step_;
  TZ_ASSIGN_OR_RETURN(metrics_, MetricsLog::open(args_.metrics_path, args_.tensorboard_dir, run));
  return Status();
}

}  // namespace tierzero::engine::trainer
