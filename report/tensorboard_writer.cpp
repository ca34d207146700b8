#include "report/internal/tensorboard_writer.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "report/internal/tensorboard_event.h"

namespace tierzero::report {
namespace {

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  return gethostname(name, sizeof name - 1) == 0 && name[0] != '\0' ? name : "localhost";
}

constexpr double kGiB = 1073741824.0;

}  // namespace

std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& step) {
  std::vector<std::pair<std::string, double>> scalars = {
      {"train/loss", step.loss},
      {"train/lr", step.lr},
      {"train/grad_norm", step.grad_norm},
      {"train/tokens_per_s", step.tokens_per_s},
      {"train/tflops", step.tflops},
      {"train/step_time_s", step.step_time_s},
      {"memory/gpu_peak_GiB", static_cast<double>(step.gpu_peak_bytes) / kGiB},
      {"memory/gpu_reserved_GiB", static_cast<double>(step.gpu_reserved_bytes) / kGiB},
      {"memory/pinned_GiB", static_cast<double>(step.pinned_bytes) / kGiB},
      {"memory/pageable_GiB", static_cast<double>(step.pageable_bytes) / kGiB},
      {"memory/nvme_GiB", static_cast<double>(step.nvme_bytes) / kGiB}};
  const std::pair<const char*, const std::optional<double>*> bandwidths[] = {
      {"bandwidth/h2d_GBps", &step.h2d_gbps},
      {"bandwidth/d2h_GBps", &step.d2h_gbps},
      {"bandwidth/nvme_read_GBps", &step.nvme_read_gbps},
      {"bandwidth/nvme_write_GBps", &step.nvme_write_gbps}};
  for (const auto& [tag, gbps] : bandwidths) {
    if (gbps->has_value()) scalars.emplace_back(tag, **gbps);
  }
  if (step.breakdown) {
    const StepBreakdown& b = *step.breakdown;
    scalars.insert(scalars.end(), {{"time/forward_s", b.forward_s},
                                   {"time/backward_s", b.backward_s},
                                   {"time/grad_d2h_s", b.grad_d2h_s},
                                   {"time/cpu_optimizer_s", b.cpu_optimizer_s},
                                   {"time/param_h2d_s", b.param_h2d_s},
                                   {"time/comm_s", b.comm_s},
                                   {"time/gpu_idle_s", b.gpu_idle_s}});
  }
  if (step.epoch) scalars.emplace_back("train/epoch", *step.epoch);
  std::erase_if(scalars, [](const auto& scalar) { return !std::isfinite(scalar.second); });
  return scalars;
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const EvalMetrics& eval) {
  std::vector<std::pair<std::string, double>> scalars = {{"eval/loss", eval.loss},
                                                         {"eval/perplexity", eval.perplexity}};
  std::erase_if(scalars, [](const auto& scalar) { return !std::isfinite(scalar.second); });
  return scalars;
}

void TensorBoardWriter::FileCloser::operator()(std::FILE* f) const { std::fclose(f); }

TensorBoardWriter::TensorBoardWriter(std::string path, std::unique_ptr<std::FILE, FileCloser> file)
    : path_(std::move(path)), file_(std::move(file)) {}

Result<TensorBoardWriter> TensorBoardWriter::open(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return io_error("cannot create TensorBoard directory " + dir + ": " + error.message() +
                    "; choose a writable --tensorboard directory");
  }
  const double now = unix_seconds();
  const std::string path = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(now)) + "." +
                           host_name() + "." + std::to_string(getpid()) + ".tierzero";
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  if (!file) {
    return errno_status(errno, "cannot create TensorBoard event file " + path)
        .with_context("choose a writable --tensorboard directory");
  }
  TensorBoardWriter writer(path, std::move(file));
  TZ_RETURN_IF_ERROR(writer.write_event(internal::file_version_event(now), "the file_version event"));
  return writer;
}

Status TensorBoardWriter::write_step(const StepMetrics& step) {
  return write_event(internal::scalars_event(unix_seconds(), step.step, tensorboard_scalars(step)),
                     "step " + std::to_string(step.step));
}

Status TensorBoardWriter::write_eval(const EvalMetrics& eval) {
  return write_event(internal::scalars_event(unix_seconds(), eval.step, tensorboard_scalars(eval)),
                     "the evaluation after step " + std::to_string(eval.step));
}

Status TensorBoardWriter::write_event(const std::string& event, const std::string& what) {
  const std::string record = internal::tfrecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_.get()) != record.size() || std::fflush(file_.get()) != 0) {
    return errno_status(errno,
                        "cannot write " + what + " to TensorBoard event file " + path_ + " (check free space on its "
                        "file system)");
  }
  return {};
}

}  // namespace tierzero::report
