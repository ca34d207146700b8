#include "engine/train/internal/metrics_log.h"

namespace tierzero::engine::trainer {

Result<MetricsLog> MetricsLog::open(const std::string& path, const std::string& tensorboard_dir,
                                    const report::RunInfo& run) {
  MetricsLog log;
  if (!path.empty()) {
    TZ_ASSIGN_OR_RETURN(log.writer_, report::MetricsWriter::open(path, run));
  }
  if (!tensorboard_dir.empty()) {
    TZ_ASSIGN_OR_RETURN(log.tensorboard_, report::TensorBoardWriter::open(tensorboard_dir));
  }
  return log;
}

Status MetricsLog::write(const StepRecord& record, int64_t run_gpu_peak_bytes) {
  if (!writer_ && !tensorboard_) return Status();
  report::StepMetrics step;
  step.step = record.step;
  step.loss = record.loss;
  step.lr = record.lr;
  step.grad_norm = record.grad_norm;
  step.tokens_per_s = record.tokens_per_s;
  step.tflops = record.tflops;
  step.step_time_s = record.seconds;
  step.gpu_peak_bytes = std::max<int64_t>(run_gpu_peak_bytes, 0);
  step.gpu_reserved_bytes = std::max<int64_t>(record.memory.gpu_reserved_bytes, 0);
  step.pinned_bytes = record.memory.pinned_bytes;
  step.pageable_bytes = record.memory.pageable_bytes;
  step.nvme_bytes = record.memory.nvme_bytes;
  step.epoch = record.epoch;
  if (record.nvme_io) {
    step.nvme_read_bytes = static_cast<int64_t>(record.nvme_io->step_read_bytes);
    step.nvme_written_bytes = static_cast<int64_t>(record.nvme_io->step_written_bytes);
    step.nvme_wait_s = record.nvme_io->step_wait_s;
  }
  if (record.times) {
    const StepTimes& t = *record.times;
    if (t.gpu_optimizer_elements > 0) {
      step.gpu_optimizer_elements = t.gpu_optimizer_elements;
      step.gpu_optimizer_s = t.gpu_optimizer_s;
      step.gpu_optimizer_wait_s = t.gpu_optimizer_wait_s;
    }
    step.breakdown = report::StepBreakdown{.forward_s = t.forward_s,
                                           .backward_s = t.backward_s,
                                           .grad_d2h_s = t.grad_d2h_s,
                                           .cpu_optimizer_s = t.cpu_optimizer_s,
                                           .param_h2d_s = t.param_h2d_s,
                                           .comm_s = t.comm_s,
                                           .gpu_idle_s = t.gpu_idle_s};
  }
  if (writer_) TZ_RETURN_IF_ERROR(writer_->write_step(step));
  return tensorboard_ ? tensorboard_->write_step(step) : Status();
}

Status MetricsLog::write_eval(const EvalResult& result) {
  if (!writer_ && !tensorboard_) return Status();
  const report::EvalMetrics eval{.step = result.step,
                                 .loss = result.loss,
                                 .perplexity = result.perplexity,
                                 .tokens = result.tokens,
                                 .samples = result.samples,
                                 .epoch = result.epoch,
                                 .eval_time_s = result.seconds};
  if (writer_) TZ_RETURN_IF_ERROR(writer_->write_eval(eval));
  return tensorboard_ ? tensorboard_->write_eval(eval) : Status();
}

Status MetricsLog::write_save(const report::SaveMetrics& save) {
  return writer_ ? writer_->write_save(save) : Status();
}

}  // namespace tierzero::engine::trainer
