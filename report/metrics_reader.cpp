#include <filesystem>
#include <fstream>

#include "report/internal/metrics.h"
#include "report/internal/metrics_json.h"

namespace tierzero::report {

namespace {

constexpr const char* kSeeFormat = " (tierzero metrics format: report/METRICS.md)";

std::string default_name(const std::string& path) { return std::filesystem::path(path).stem().string(); }

}  // namespace

Result<RunMetrics> read_metrics_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return not_found("metrics file " + path + " does not exist: pass the file `tierzero train --metrics` wrote");
  }
  std::ifstream in(path);
  if (!in) return io_error("cannot open metrics file " + path + ": check its permissions");
  RunMetrics out;
  out.path = path;
  std::string text;
  int64_t line_number = 0;
  bool have_run = false;
  while (std::getline(in, text)) {
    ++line_number;
    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json line = nlohmann::json::parse(text, nullptr, false);
    if (line.is_discarded() || !line.is_object()) {
      return corrupt(where + "not a JSON object" + kSeeFormat +
                     (in.peek() == EOF ? "; a run that died mid-write leaves a partial last line: delete it" : ""));
    }
    const std::string type = line.value("type", std::string());
    if (!have_run) {
      if (type != "run")
        return corrupt(where + "the first line must be the run line {\"type\":\"run\",...}" + kSeeFormat);
      Result<RunInfo> run = internal::parse_run_line(line);
      if (!run.ok()) return run.status().with_context(where.substr(0, where.size() - 2));
      out.run = std::move(run).value();
      have_run = true;
      continue;
    }
    if (type == "eval") {
      Result<EvalMetrics> eval = internal::parse_eval_line(line);
      if (!eval.ok()) return eval.status().with_context(where.substr(0, where.size() - 2));
      const int64_t after = out.evals.empty() ? 0 : out.evals.back().step;
      if (eval->step < after) {
        return corrupt(where + "the evaluation after step " + std::to_string(eval->step) + " follows one after step " +
                       std::to_string(after) + "; evaluations must not go back (two runs appended to one file?)");
      }
      out.evals.push_back(std::move(eval).value());
      continue;
    }
    if (type == "save") {
      Result<SaveMetrics> save = internal::parse_save_line(line);
      if (!save.ok()) return save.status().with_context(where.substr(0, where.size() - 2));
      if (!out.saves.empty() && save->step <= out.saves.back().step) {
        return corrupt(where + "the save of step " + std::to_string(save->step) + " follows the save of step " +
                       std::to_string(out.saves.back().step) + "; saves must go forward (two runs appended to one file?)");
      }
      out.saves.push_back(std::move(save).value());
      continue;
    }
    if (type != "step") {
      return corrupt(where + "'type' is \"" + type +
                     "\"; every line after the run line is a \"step\", \"eval\" or \"save\" line" + kSeeFormat);
    }
    Result<StepMetrics> step = internal::parse_step_line(line);
    if (!step.ok()) return step.status().with_context(where.substr(0, where.size() - 2));
    if (!out.steps.empty() && step->step <= out.steps.back().step) {
      return corrupt(where + "step " + std::to_string(step->step) + " follows step " +
                     std::to_string(out.steps.back().step) +
                     "; steps must increase (two runs appended to one file? give each run its own --metrics file)");
    }
    out.steps.push_back(std::move(step).value());
  }
  if (in.bad()) return io_error("error reading metrics file " + path);
  if (!have_run) return corrupt(path + ": empty; a metrics file starts with the run line" + kSeeFormat);
  if (out.run.name.empty()) out.run.name = default_name(path);
  return out;
}

}  // namespace tierzero::report
