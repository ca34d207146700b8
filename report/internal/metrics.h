// tierzero report/: the training metrics file (JSONL), its writer and its reader.
//
// One JSON object per line (format described in report/METRICS.md): first a run line
// {"type":"run","format":1,...} with the run's configuration, then one {"type":"step",...} line per
// optimizer step, one {"type":"eval",...} line after the step an evaluation followed, and one
// {"type":"save",...} line when a checkpoint became durable. The trainer writes it with MetricsWriter; `tierzero report` reads it with
// read_metrics_file. No LibTorch, no CUDA: this library sits beside common/.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/common.h"

namespace tierzero::report {

// The version written in the run line; a reader refuses a newer one.
inline constexpr int kMetricsFormat = 1;

// The run line: what was trained, and how.
struct RunInfo {
  std::string name;             // label in the report's legends; empty: the file's name without .jsonl
  std::string model;            // HF directory, or "builtin" for the built-in tiny model
  std::string config;           // ds_config path ("" when the built-in default was used)
  std::string data;             // training data path
  int world_size = 1;           // ranks
  std::string dtype;            // "bf16" | "fp16" | "fp32"
  int stage = 0;                // ZeRO stage 0-3
  std::string offload;          // e.g. "optimizer cpu, params cpu" or "none"
  int64_t parameters = 0;       // model parameters (0: unknown)
  int64_t tokens_per_step = 0;  // global tokens per optimizer step (0: unknown)
};

// Where one step's wall time went, in seconds (rank 0's view). Written only when the trainer
// measures it; a phase the run does not have (no offload: grad_d2h_s) is 0.
struct StepBreakdown {
  double forward_s = 0;
  double backward_s = 0;
  double grad_d2h_s = 0;       // gradient shards copied to host memory
  double cpu_optimizer_s = 0;  // the CPU Adam step
  double param_h2d_s = 0;      // updated 16-bit parameters copied back to the GPU
  double comm_s = 0;           // collectives not hidden behind compute
  double gpu_idle_s = 0;       // the GPU waited on the host or on I/O
};

// One optimizer step. Doubles that are not finite (a skipped fp16 step's loss) are written as
// null and read back as NaN. Bandwidths are GB/s (1e9 bytes/s), absent when not measured.
struct StepMetrics {
  int64_t step = 0;  // 1-based optimizer step
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double tokens_per_s = 0;
  double tflops = 0;  // model TFLOPS achieved over the step (all ranks)
  double step_time_s = 0;
  int64_t gpu_peak_bytes = 0;  // peak allocated GPU memory since the run began
  int64_t gpu_reserved_bytes = 0;
  int64_t pinned_bytes = 0;               // page-locked host memory held
  int64_t pageable_bytes = 0;             // ordinary host memory held for offloaded state
  int64_t nvme_bytes = 0;                 // bytes of swap files on NVMe
  std::optional<double> h2d_gbps;         // pinned host -> GPU, this step
  std::optional<double> d2h_gbps;         // GPU -> pinned host
  std::optional<double> nvme_read_gbps;   // NVMe -> host
  std::optional<double> nvme_write_gbps;  // host -> NVMe
  std::optional<int64_t> nvme_read_bytes;     // bytes the step read from NVMe (runs with state on NVMe)
  std::optional<int64_t> nvme_written_bytes;  // bytes the step wrote to NVMe
  std::optional<double> nvme_wait_s;          // seconds the NVMe optimizer's step waited for the disk
  std::optional<int64_t> gpu_optimizer_elements;  // tierzero.gpu_optimizer_share: the elements the GPU stepped
  std::optional<double> gpu_optimizer_s;          // and its pieces' seconds in flight (within cpu_optimizer_s)
  std::optional<double> gpu_optimizer_wait_s;     // and the CPU's wait for them once its own pieces were done
  std::optional<StepBreakdown> breakdown;
  std::optional<double> epoch;  // epochs of the training data done after the step (1.37); absent: not known
};

// One evaluation of the held-out data, after optimizer step `step` (the mean over the eval set's
// target tokens: engine/train/internal/evaluation.h).
struct EvalMetrics {
  int64_t step = 0;
  double loss = 0;
  double perplexity = 0;  // exp(loss)
  int64_t tokens = 0;     // target tokens evaluated
  int64_t samples = 0;    // samples evaluated
  std::optional<double> epoch;
  std::optional<double> eval_time_s;
};

// One checkpoint made durable by `train --save` / `--save-every`, written when it is (after the step
// a periodic save ran beside). Sizes and times are of the engine checkpoint, DIR/global_stepN.
struct SaveMetrics {
  int64_t step = 0;               // the optimizer step whose state it holds
  int64_t bytes = 0;              // bytes of its files on disk, every rank's
  double durable_s = 0;           // wall seconds from the save's start until it was committed (durable)
  bool background = false;        // it streamed out while the next steps ran (commit after the last of them)
  int64_t committed_after_step = 0;  // the step at whose end it was committed: `step` when synchronous (0: a
                                     // file written before this field)
  std::optional<double> write_s;  // background: seconds until rank 0's files were written and synced
  std::optional<double> held_s;   // background: seconds the optimizer waited for the save to read its state
};

// A whole metrics file as read.
struct RunMetrics {
  std::string path;
  RunInfo run;  // run.name filled in from the path when the file left it empty
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;  // in file order (steps non-decreasing)
  std::vector<SaveMetrics> saves;  // in file order (steps increasing)
};

// Writes a metrics file line by line. Rank 0 alone writes; every line is flushed as written, so
// a run that dies leaves every finished step readable. Not thread-safe.
class MetricsWriter {
 public:
  // Creates (or truncates) `path` and writes the run line. Error (kIo) names the path and what to
  // do when the file cannot be created or written.
  static Result<MetricsWriter> open(const std::string& path, const RunInfo& run);

  // Appends one step line and flushes it. Error (kIo) names the path and the step.
  Status write_step(const StepMetrics& step);
  // Appends one eval line and flushes it. Error (kIo) names the path and the step.
  Status write_eval(const EvalMetrics& eval);
  // Appends one save line and flushes it. Error (kIo) names the path and the step.
  Status write_save(const SaveMetrics& save);

  // Closes the file; further write_step calls fail. Error (kIo) when the final flush or close
  // fails. The destructor closes without reporting.
  Status close();

  const std::string& path() const { return path_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const;
  };
  MetricsWriter(std::string path, std::unique_ptr<std::FILE, FileCloser> file);
  Status write_line(const std::string& line, const std::string& what);

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

// Reads a metrics file. Errors name the file and the 1-based line: not JSON, a missing or
// mistyped field, a first line that is not the run line, a format newer than this reader, a step
// number that does not increase (an eval line's step may repeat the step line's before it; save
// lines' steps increase among themselves) (kCorrupt); a file that cannot be opened (kNotFound / kIo).
// Unknown fields are ignored, so newer writers may add some.
Result<RunMetrics> read_metrics_file(const std::string& path);

}  // namespace tierzero::report
