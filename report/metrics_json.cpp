#include "report/internal/metrics_json.h"

#include <cmath>
#include <limits>

namespace tierzero::report::internal {

namespace {

using nlohmann::json;

json number_or_null(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

const char* type_name(const json& v) { return v.is_null() ? "null" : v.type_name(); }

// Reads the fields of one line; the first failure is kept and every later read is skipped.
class FieldReader {
 public:
  explicit FieldReader(const json& line) : line_(line) {}

  void string(const char* key, std::string& out, bool required) {
    const json* v = find(key, required);
    if (v == nullptr) return;
    if (!v->is_string()) return fail(key, *v, "a string");
    out = v->get<std::string>();
  }
  void integer(const char* key, int64_t& out, bool required) {
    const json* v = find(key, required);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return fail(key, *v, "an integer");
    out = v->get<int64_t>();
  }
  void integer(const char* key, int& out, bool required) {
    int64_t wide = out;
    integer(key, wide, required);
    out = static_cast<int>(wide);
  }
  void boolean(const char* key, bool& out) {
    const json* v = find(key, true);
    if (v == nullptr) return;
    if (!v->is_boolean()) return fail(key, *v, "true or false");
    out = v->get<bool>();
  }
  // A number, or null for a value that was not finite.
  void number(const char* key, double& out) {
    const json* v = find(key, true);
    if (v == nullptr) return;
    if (v->is_null()) {
      out = std::numeric_limits<double>::quiet_NaN();
    } else if (v->is_number()) {
      out = v->get<double>();
    } else {
      fail(key, *v, "a number or null");
    }
  }
  void optional_integer(const char* key, std::optional<int64_t>& out) {
    if (!status_.ok() || !line_.contains(key)) return;
    int64_t v = 0;
    integer(key, v, true);
    out = v;
  }
  void optional_number(const char* key, std::optional<double>& out) {
    if (!status_.ok() || !line_.contains(key)) return;
    double v = 0;
    number(key, v);
    out = v;
  }
  const json* object(const char* key) {
    if (!status_.ok() || !line_.contains(key)) return nullptr;
    const json& v = line_[key];
    if (!v.is_object()) {
      fail(key, v, "an object");
      return nullptr;
    }
    return &v;
  }
  void fail_with(Status s) {
    if (status_.ok()) status_ = std::move(s);
  }
  const Status& status() const { return status_; }

 private:
  const json* find(const char* key, bool required) {
    if (!status_.ok()) return nullptr;
    auto it = line_.find(key);
    if (it == line_.end()) {
      if (required) status_ = corrupt(std::string("field '") + key + "' is missing");
      return nullptr;
    }
    return &*it;
  }
  void fail(const char* key, const json& v, const char* expected) {
    fail_with(corrupt(std::string("field '") + key + "' is " + type_name(v) + "; expected " + expected));
  }

  const json& line_;
  Status status_;
};

}  // namespace

json run_line(const RunInfo& run) {
  return {{"type", "run"},
          {"format", kMetricsFormat},
          {"name", run.name},
          {"model", run.model},
          {"config", run.config},
          {"data", run.data},
          {"world_size", run.world_size},
          {"dtype", run.dtype},
          {"stage", run.stage},
          {"offload", run.offload},
          {"parameters", run.parameters},
          {"tokens_per_step", run.tokens_per_step}};
}

json step_line(const StepMetrics& s) {
  json j = {{"type", "step"},
            {"step", s.step},
            {"loss", number_or_null(s.loss)},
            {"lr", number_or_null(s.lr)},
            {"grad_norm", number_or_null(s.grad_norm)},
            {"tokens_per_s", number_or_null(s.tokens_per_s)},
            {"tflops", number_or_null(s.tflops)},
            {"step_time_s", number_or_null(s.step_time_s)},
            {"gpu_peak_bytes", s.gpu_peak_bytes},
            {"gpu_reserved_bytes", s.gpu_reserved_bytes},
            {"pinned_bytes", s.pinned_bytes},
            {"pageable_bytes", s.pageable_bytes},
            {"nvme_bytes", s.nvme_bytes}};
  if (s.h2d_gbps) j["h2d_gbps"] = number_or_null(*s.h2d_gbps);
  if (s.d2h_gbps) j["d2h_gbps"] = number_or_null(*s.d2h_gbps);
  if (s.nvme_read_gbps) j["nvme_read_gbps"] = number_or_null(*s.nvme_read_gbps);
  if (s.nvme_write_gbps) j["nvme_write_gbps"] = number_or_null(*s.nvme_write_gbps);
  if (s.nvme_read_bytes) j["nvme_read_bytes"] = *s.nvme_read_bytes;
  if (s.nvme_written_bytes) j["nvme_written_bytes"] = *s.nvme_written_bytes;
  if (s.nvme_wait_s) j["nvme_wait_s"] = number_or_null(*s.nvme_wait_s);
  if (s.gpu_optimizer_elements) j["gpu_optimizer_elements"] = *s.gpu_optimizer_elements;
  if (s.gpu_optimizer_s) j["gpu_optimizer_s"] = number_or_null(*s.gpu_optimizer_s);
  if (s.gpu_optimizer_wait_s) j["gpu_optimizer_wait_s"] = number_or_null(*s.gpu_optimizer_wait_s);
  if (s.epoch) j["epoch"] = number_or_null(*s.epoch);
  if (s.breakdown) {
    const StepBreakdown& b = *s.breakdown;
    j["breakdown"] = {{"forward_s", b.forward_s},     {"backward_s", b.backward_s},
                      {"grad_d2h_s", b.grad_d2h_s},   {"cpu_optimizer_s", b.cpu_optimizer_s},
                      {"param_h2d_s", b.param_h2d_s}, {"comm_s", b.comm_s},
                      {"gpu_idle_s", b.gpu_idle_s}};
  }
  return j;
}

json eval_line(const EvalMetrics& e) {
  json j = {{"type", "eval"},
            {"step", e.step},
            {"loss", number_or_null(e.loss)},
            {"perplexity", number_or_null(e.perplexity)},
            {"tokens", e.tokens},
            {"samples", e.samples}};
  if (e.epoch) j["epoch"] = number_or_null(*e.epoch);
  if (e.eval_time_s) j["eval_time_s"] = number_or_null(*e.eval_time_s);
  return j;
}

json save_line(const SaveMetrics& s) {
  json j = {{"type", "save"},
            {"step", s.step},
            {"bytes", s.bytes},
            {"durable_s", number_or_null(s.durable_s)},
            {"background", s.background},
            {"committed_after_step", s.committed_after_step}};
  if (s.write_s) j["write_s"] = number_or_null(*s.write_s);
  if (s.held_s) j["held_s"] = number_or_null(*s.held_s);
  return j;
}

Result<RunInfo> parse_run_line(const json& line) {
  RunInfo run;
  int64_t format = 0;
  FieldReader r(line);
  r.integer("format", format, true);
  if (r.status().ok() && format > kMetricsFormat) {
    r.fail_with(unsupported("metrics format " + std::to_string(format) + " is newer than this tierzero reads (" +
                            std::to_string(kMetricsFormat) + "): use the tierzero that wrote it"));
  }
  r.string("name", run.name, false);
  r.string("model", run.model, false);
  r.string("config", run.config, false);
  r.string("data", run.data, false);
  r.integer("world_size", run.world_size, false);
  r.string("dtype", run.dtype, false);
  r.integer("stage", run.stage, false);
  r.string("offload", run.offload, false);
  r.integer("parameters", run.parameters, false);
  r.integer("tokens_per_step", run.tokens_per_step, false);
  if (!r.status().ok()) return r.status();
  return run;
}

Result<StepMetrics> parse_step_line(const json& line) {
  StepMetrics s;
  FieldReader r(line);
  r.integer("step", s.step, true);
  r.number("loss", s.loss);
  r.number("lr", s.lr);
  r.number("grad_norm", s.grad_norm);
  r.number("tokens_per_s", s.tokens_per_s);
  r.number("tflops", s.tflops);
  r.number("step_time_s", s.step_time_s);
  r.integer("gpu_peak_bytes", s.gpu_peak_bytes, true);
  r.integer("gpu_reserved_bytes", s.gpu_reserved_bytes, true);
  r.integer("pinned_bytes", s.pinned_bytes, true);
  r.integer("pageable_bytes", s.pageable_bytes, true);
  r.integer("nvme_bytes", s.nvme_bytes, true);
  r.optional_number("h2d_gbps", s.h2d_gbps);
  r.optional_number("d2h_gbps", s.d2h_gbps);
  r.optional_number("nvme_read_gbps", s.nvme_read_gbps);
  r.optional_number("nvme_write_gbps", s.nvme_write_gbps);
  r.optional_integer("nvme_read_bytes", s.nvme_read_bytes);
  r.optional_integer("nvme_written_bytes", s.nvme_written_bytes);
  r.optional_number("nvme_wait_s", s.nvme_wait_s);
  r.optional_integer("gpu_optimizer_elements", s.gpu_optimizer_elements);
  r.optional_number("gpu_optimizer_s", s.gpu_optimizer_s);
  r.optional_number("gpu_optimizer_wait_s", s.gpu_optimizer_wait_s);
  r.optional_number("epoch", s.epoch);
  if (const json* b = r.object("breakdown")) {
    StepBreakdown d;
    FieldReader br(*b);
    br.number("forward_s", d.forward_s);
    br.number("backward_s", d.backward_s);
    br.number("grad_d2h_s", d.grad_d2h_s);
    br.number("cpu_optimizer_s", d.cpu_optimizer_s);
    br.number("param_h2d_s", d.param_h2d_s);
    br.number("comm_s", d.comm_s);
    br.number("gpu_idle_s", d.gpu_idle_s);
    if (!br.status().ok()) return br.status().with_context("in 'breakdown'");
    s.breakdown = d;
  }
  if (!r.status().ok()) return r.status();
  return s;
}

Result<EvalMetrics> parse_eval_line(const json& line) {
  EvalMetrics e;
  FieldReader r(line);
  r.integer("step", e.step, true);
  r.number("loss", e.loss);
  r.number("perplexity", e.perplexity);
  r.integer("tokens", e.tokens, true);
  r.integer("samples", e.samples, true);
  r.optional_number("epoch", e.epoch);
  r.optional_number("eval_time_s", e.eval_time_s);
  if (!r.status().ok()) return r.status();
  return e;
}

Result<SaveMetrics> parse_save_line(const json& line) {
  SaveMetrics s;
  FieldReader r(line);
  r.integer("step", s.step, true);
  r.integer("bytes", s.bytes, true);
  r.number("durable_s", s.durable_s);
  r.boolean("background", s.background);
  r.integer("committed_after_step", s.committed_after_step, false);
  r.optional_number("write_s", s.write_s);
  r.optional_number("held_s", s.held_s);
  if (!r.status().ok()) return r.status();
  return s;
}

}  // namespace tierzero::report::internal
