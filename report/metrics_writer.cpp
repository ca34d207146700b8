#include <cerrno>

#include "report/internal/metrics.h"
#include "report/internal/metrics_json.h"

namespace tierzero::report {

void MetricsWriter::FileCloser::operator()(std::FILE* f) const { std::fclose(f); }

MetricsWriter::MetricsWriter(std::string path, std::unique_ptr<std::FILE, FileCloser> file)
    : path_(std::move(path)), file_(std::move(file)) {}

Result<MetricsWriter> MetricsWriter::open(const std::string& path, const RunInfo& run) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "w"));
  if (!file) {
    return errno_status(errno, "cannot create metrics file " + path).with_context("choose a writable --metrics path");
  }
  MetricsWriter writer(path, std::move(file));
  TZ_RETURN_IF_ERROR(writer.write_line(internal::run_line(run).dump(), "the run line"));
  return writer;
}

Status MetricsWriter::write_step(const StepMetrics& step) {
  return write_line(internal::step_line(step).dump(), "step " + std::to_string(step.step));
}

Status MetricsWriter::write_eval(const EvalMetrics& eval) {
  return write_line(internal::eval_line(eval).dump(), "the evaluation after step " + std::to_string(eval.step));
}

Status MetricsWriter::write_save(const SaveMetrics& save) {
  return write_line(internal::save_line(save).dump(), "the save of step " + std::to_string(save.step));
}

Status MetricsWriter::write_line(const std::string& line, const std::string& what) {
  if (!file_) return io_error("metrics file " + path_ + " is closed; cannot write " + what);
  if (std::fputs(line.c_str(), file_.get()) < 0 || std::fputc('\n', file_.get()) == EOF ||
      std::fflush(file_.get()) != 0) {
    return errno_status(
        errno, "cannot write " + what + " to metrics file " + path_ + " (check free space on its file system)");
  }
  return {};
}

Status MetricsWriter::close() {
  if (!file_) return {};
  std::FILE* f = file_.release();
  if (std::fclose(f) != 0) return errno_status(errno, "cannot close metrics file " + path_);
  return {};
}

}  // namespace tierzero::report
