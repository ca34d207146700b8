// `tierzero bench io`: sequential read and write bandwidth and latency of the nvme/ engine,
// optionally swept, tuned into an `aio` block, and compared with fio in the same run.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>

#include "common/common.h"
#include "nvme/io_engine.h"
#include "tools/bench_io_config.h"
#include "tools/bench_io_fio.h"
#include "tools/bench_io_pass.h"
#include "tools/bench_io_pipeline.h"
#include "tools/bench_io_points.h"
#include "tools/bench_io_target.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {

namespace {

struct BenchIoFlags {
  std::string path;
  std::string size;
  std::string backend = "auto";
  std::string block_size = "1MiB";
  std::string buffers = "huge";
  uint32_t queue_depth = 32;
  uint32_t threads = 1;
  uint32_t repeat = 0;
  bool sweep = false;
  bool tune = false;
  bool vs_fio = false;
  bool end_fsync = false;
  bool new_file = false;
  bool mixed = false;
  bool pipeline = false;
  double record_ms = 20;
  int pipeline_buffers = 4;  // offload_optimizer.buffer_count of the --pipeline passes
  std::string json;
  std::string update_config;  // with --tune: the ds_config whose aio block is replaced
  CLI::App* cmd = nullptr;
  bool given(const char* flag) const { return cmd->count(flag) > 0; }
  int pipeline_passes() const { return 3; }
};

// The kernel's transparent huge page mode ("always", "madvise", "never"), or "unknown".
std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = text.find('['), close = text.find(']');
  return open == std::string::npos || close == std::string::npos || close < open
             ? "unknown"
             : text.substr(open + 1, close - open - 1);
}

struct PointResult {
  nvme::IoConfig config;  // backend resolved
  PassResult write, read;
  std::optional<PassResult> mixed;              // --mixed
  std::optional<PipelineResult> first, spread;  // --pipeline: the records in memory first, or spread
  std::optional<FioResult> fio_write, fio_read;
};

class BenchIo {
 public:
  explicit BenchIo(const BenchIoFlags& flags) : flags_(flags), report_("tierzero bench io") {}

  void run() {
    if (!flags_.update_config.empty()) {
      if (!flags_.tune) throw Error(invalid_argument("--update-config needs --tune: it writes the tuned aio block"));
      throw_if_error(check_config_to_update(flags_.update_config));
    }
    const PointChoices choices = parse_choices();
    size_ = value_or_throw(parse_bytes(!flags_.size.empty()            ? flags_.size
                                       : (flags_.sweep || flags_.tune) ? "256MiB"
                                                                       : "1GiB"));
    if (size_ == 0) throw Error(invalid_argument("--size must be at least one byte"));
    const std::string dir = value_or_throw(choose_bench_dir(flags_.path, size_));
    dir_ = dir;
    file_ = std::make_unique<ScopedPath>(dir + "/tierzero-bench-io-" + std::to_string(getpid()) + ".dat");
    if (flags_.vs_fio) fio_ = find_fio();

    std::vector<nvme::IoConfig> points = flags_.tune    ? tune_points(choices)
                                         : flags_.sweep ? sweep_points(choices)
                                                        : std::vector<nvme::IoConfig>{single_point(choices)};
    lay_out_file(points.front());
    begin_report(dir, points.size());
    for (const nvme::IoConfig& point : points) measure(point);
    if (flags_.tune) tune();
    finish();
  }

 private:
  PointChoices parse_choices() const {
    PointChoices c;
    if (flags_.given("--backend")) c.backend = value_or_throw(nvme::parse_backend(flags_.backend));
    if (flags_.given("--block-size")) c.block_size = value_or_throw(parse_bytes(flags_.block_size));
    if (flags_.given("--queue-depth")) c.queue_depth = flags_.queue_depth;
    if (flags_.given("--threads")) c.threads = flags_.threads;
    return c;
  }

  // Writes the whole file once, untimed, so every timed write overwrites allocated blocks, as
  // fio's do (and as swap files are used).
  void lay_out_file(const nvme::IoConfig& config) {
    auto engine = value_or_throw(nvme::IoEngine::create(config));
    nvme::FileRef file = value_or_throw(engine->open(file_->path(), {nvme::OpenMode::kWrite, size_, true}));
    BenchBuffers buffers(*engine, config.queue_depth * config.intra_op_parallelism, config.block_size, pages());
    (void)value_or_throw(run_pass(*engine, file, buffers, size_, PassData::kWritePattern, "preparing file"));
    throw_if_error(file->sync());
    direct_text_ = file->direct() ? "O_DIRECT (memory alignment " + std::to_string(file->mem_align()) +
                                        ", offset alignment " + std::to_string(file->offset_align()) + ")"
                                  : "buffered (the file system refuses O_DIRECT): figures include the page cache";
  }

  void begin_report(const std::string& dir, size_t points) {
    report_.param("file", file_->path() + (is_memory_fs(dir) ? " (tmpfs: memory, not a disk)" : ""));
    report_.param("size", format_bytes(size_) + " per pass, sequential, from offset 0");
    report_.param("I/O", direct_text_);
    report_.param("buffers", pages() == BufferPages::kHuge
                                 ? "2 MiB-aligned, advised onto transparent huge pages (nvme::allocate_aligned; "
                                   "kernel THP mode " +
                                       thp_mode() + "); io_uring registers them"
                                 : std::string("4 KiB pages (as fio's default buffers); io_uring registers them"));
    if (flags_.new_file) {
      report_.param("write passes",
                    "each to a new file (unlinked, created, preallocated and sized, untimed), as convert "
                    "writes; fio: --fallocate=native on a new file");
    }
    if (flags_.end_fsync) report_.param("durability", "each write pass ends with fdatasync, timed (fio: end_fsync=1)");
    if (flags_.mixed) {
      report_.param("mixed",
                    "reads of the file's first half and writes of its second half, one request of each in "
                    "turn (the NVMe optimizer's read-ahead beside its write-behind); GB/s of both; no fio peer");
    }
    if (flags_.pipeline) {
      report_.param("pipeline",
                    "the NVMe optimizer's records inside the backward (offload's RecordCache, every pass "
                    "back to front, read ahead and written behind): " +
                        pipeline_text() +
                        "; GB/s of the bytes read and written; verified: each record "
                        "read back held the last pass's stamp");
    }
    report_.param("points", std::to_string(points) + (flags_.tune ? " (tuning)" : flags_.sweep ? " (sweep)" : ""));
    report_.param("latency", "per request (one block), submit to completion; CPU % = process CPU time / wall time");
    report_.param("repeats", std::to_string(repeats()) +
                                 (repeats() > 1 ? " per pass, median shown" +
                                                      std::string(compare_fio() ? ", alternating with fio" : "")
                                                : ""));
    if (flags_.vs_fio) {
      report_.param("fio", fio_.empty()
                               ? "not found (install fio or put it on PATH): no comparison"
                               : fio_ + " --ioengine=io_uring --direct=1, same file, bs, iodepth, numjobs = threads");
    }
    std::vector<BenchColumn> cols = {{"op", 6},       {"backend", 9}, {"block", 6},     {"depth", 6},
                                     {"threads", 7},  {"GB/s", 7, 3}, {"p50_us", 9, 0}, {"p99_us", 9, 0},
                                     {"cpu_%", 6, 0}, {"verified", 8}};
    if (compare_fio()) {
      for (BenchColumn c : std::vector<BenchColumn>{{"fio_GB/s", 8, 3},
                                                    {"fio_p50_us", 10, 0},
                                                    {"fio_p99_us", 10, 0},
                                                    {"fio_cpu_%", 9, 0},
                                                    {"ratio", 6, 3}}) {
        cols.push_back(c);
      }
    }
    report_.begin(cols);
  }

  bool compare_fio() const { return flags_.vs_fio && !fio_.empty(); }

  BufferPages pages() const { return flags_.buffers == "small" ? BufferPages::kSmall : BufferPages::kHuge; }

  // --new-file, untimed: the test file unlinked and created again, its blocks reserved and its size
  // set up front, as `tierzero convert` and checkpoint saves create theirs.
  nvme::FileRef fresh_file(nvme::IoEngine& engine) {
    ::unlink(file_->path().c_str());
    nvme::FileRef file = value_or_throw(engine.open(file_->path(), {nvme::OpenMode::kReadWrite, size_, true}));
    throw_if_error(file->truncate(size_));
    return file;
  }

  void measure(nvme::IoConfig config) {
    Result<std::unique_ptr<nvme::IoEngine>> created = nvme::IoEngine::create(config);
    if (!created.ok()) {
      skipped_.push_back(std::string(nvme::backend_name(config.backend)) + ": " + created.status().message());
      return;
    }
    std::unique_ptr<nvme::IoEngine> engine = std::move(created).value();
    config.backend = engine->backend();
    nvme::FileRef file = value_or_throw(engine->open(file_->path(), {nvme::OpenMode::kReadWrite, 0, true}));
    BenchBuffers buffers(*engine, config.queue_depth * config.intra_op_parallelism, config.block_size, pages());
    const std::string tag = std::string(nvme::backend_name(config.backend)) + " bs=" + short_size(config.block_size) +
                            " qd=" + std::to_string(config.queue_depth) +
                            " t=" + std::to_string(config.intra_op_parallelism);
    PointResult r{config, {}, {}, {}, {}, {}, {}, {}};
    // Alternating with fio, each run's figure is the median of `repeats`; tierzero writes last so
    // the verify pass checks its data.
    std::vector<PassResult> writes, reads;
    std::vector<FioResult> fio_writes, fio_reads;
    FioJob job{.fio = fio_,
               .file = file_->path(),
               .write = true,
               .size = size_,
               .block_size = config.block_size,
               .iodepth = config.queue_depth,
               .numjobs = config.intra_op_parallelism,
               .end_fsync = flags_.end_fsync,
               .new_file = flags_.new_file};
    for (uint32_t i = 0; i < repeats(); ++i) {
      if (compare_fio()) {
        if (flags_.new_file) ::unlink(file_->path().c_str());
        add_fio(job, fio_writes);
      }
      if (flags_.new_file) file = fresh_file(*engine);
      writes.push_back(value_or_throw(
          run_pass(*engine, file, buffers, size_, PassData::kWritePattern, "write " + tag, flags_.end_fsync)));
    }
    job.write = false;
    for (uint32_t i = 0; i < repeats(); ++i) {
      reads.push_back(value_or_throw(run_pass(*engine, file, buffers, size_, PassData::kRead, "read " + tag)));
      if (compare_fio()) add_fio(job, fio_reads);
    }
    r.write = median(writes);
    r.read = median(reads);
    if (flags_.mixed) {  // its writes are the pattern the verify pass below checks
      std::vector<PassResult> mixes;
      for (uint32_t i = 0; i < repeats(); ++i)
        mixes.push_back(value_or_throw(run_pass(*engine, file, buffers, size_, PassData::kMixed, "mixed " + tag)));
      r.mixed = median(mixes);
    }
    if (flags_.pipeline) {
      r.first = value_or_throw(run_pipeline(dir_, config, pipeline_shape(false)));
      r.spread = value_or_throw(run_pipeline(dir_, config, pipeline_shape(true)));
    }
    if (!fio_writes.empty()) r.fio_write = median(fio_writes);
    if (!fio_reads.empty()) r.fio_read = median(fio_reads);
    Result<PassResult> verify = run_pass(*engine, file, buffers, size_, PassData::kVerify, "verify " + tag);
    const bool verified = verify.ok();
    if (!verified) {
      all_verified_ = false;
      skipped_.push_back("verification failed for " + tag + ": " + verify.status().message());
    }
    add_row("write", r, r.write, r.fio_write, verified);
    add_row("read", r, r.read, r.fio_read, verified);
    if (r.mixed) add_row("mixed", r, *r.mixed, std::nullopt, verified);
    for (const auto& [name, pipe] : {std::pair{"first", r.first}, std::pair{"spread", r.spread}}) {
      if (!pipe) continue;
      all_verified_ = all_verified_ && pipe->verified;
      add_row((std::string("pipe/") + name).c_str(), r,
              PassResult{.seconds = pipe->seconds, .bytes = pipe->read_bytes + pipe->written_bytes}, std::nullopt,
              pipe->verified);
      const double bound = pipe->read_bytes / (r.read.gbps() * 1e9) + pipe->written_bytes / (r.write.gbps() * 1e9);
      const int passes = flags_.pipeline_passes();
      char text[240];
      std::snprintf(text, sizeof text,
                    "%.4f s a pass (%llu bytes read, %llu written; %.4f s blocked on the disk), %.2fx its disk bound "
                    "%.4f s (read / read GB/s + written / write GB/s, this point's rows)",
                    pipe->seconds / passes, static_cast<unsigned long long>(pipe->read_bytes / passes),
                    static_cast<unsigned long long>(pipe->written_bytes / passes), pipe->wait_seconds / passes,
                    pipe->seconds / bound, bound / passes);
      report_.summary(std::string("pipeline, records in memory ") + name, text);
    }
    results_.push_back(r);
  }

  // --pipeline's shape: --size over 16 streamed records of 32, --pipeline-buffers buffers, --record-ms each.
  PipelineShape pipeline_shape(bool spread) const {
    return {.records = 32,
            .memory_records = 16,
            .record_bytes = std::max<uint64_t>(4096, size_ / 16 / 4096 * 4096),
            .buffers = flags_.pipeline_buffers,
            .spread = spread,
            .per_record = std::chrono::microseconds(static_cast<int64_t>(flags_.record_ms * 1000)),
            .passes = flags_.pipeline_passes()};
  }
  std::string pipeline_text() const {
    const PipelineShape shape = pipeline_shape(false);
    return std::to_string(shape.records) + " records of " + format_bytes(shape.record_bytes) + ", " +
           std::to_string(shape.memory_records) + " kept in memory (the first, or spread among the streamed), " +
           std::to_string(shape.buffers) + " buffers, " + std::to_string(shape.passes) + " timed passes, " +
           std::to_string(flags_.record_ms).substr(0, std::to_string(flags_.record_ms).find('.') + 2) +
           " ms a record standing in for CPU Adam";
  }

  uint32_t repeats() const { return flags_.repeat > 0 ? flags_.repeat : compare_fio() ? 3 : 1; }

  // The run with the median GB/s.
  static PassResult median(std::vector<PassResult> runs) {
    std::sort(runs.begin(), runs.end(), [](const PassResult& a, const PassResult& b) { return a.gbps() < b.gbps(); });
    return runs[runs.size() / 2];
  }
  static FioResult median(std::vector<FioResult> runs) {
    std::sort(runs.begin(), runs.end(), [](const FioResult& a, const FioResult& b) { return a.gbps < b.gbps; });
    return runs[runs.size() / 2];
  }

  void add_fio(const FioJob& job, std::vector<FioResult>& out) {
    Result<FioResult> fio = run_fio(job);
    if (!fio.ok()) {
      skipped_.push_back("fio: " + fio.status().message());
      return;
    }
    fio_command_ = fio->command;
    out.push_back(*fio);
  }

  void add_row(const char* op, const PointResult& r, const PassResult& p, const std::optional<FioResult>& fio,
               bool verified) {
    std::vector<BenchCell> cells = {std::string(op),
                                    std::string(nvme::backend_name(r.config.backend)),
                                    short_size(r.config.block_size),
                                    int64_t{r.config.queue_depth},
                                    int64_t{r.config.intra_op_parallelism},
                                    p.gbps(),
                                    p.p50_us,
                                    p.p99_us,
                                    p.cpu_percent,
                                    std::string(verified ? "yes" : "NO")};
    if (r.config.single_submit || !r.config.overlap_events) {
      cells[1] = std::get<std::string>(cells[1]) + (r.config.single_submit ? "/ss" : "/wave");
    }
    if (compare_fio()) {
      const double nan = std::nan("");
      cells.push_back(fio ? fio->gbps : nan);
      cells.push_back(fio ? fio->p50_us : nan);
      cells.push_back(fio ? fio->p99_us : nan);
      cells.push_back(fio ? fio->cpu_percent : nan);
      cells.push_back(fio && fio->gbps > 0 ? p.gbps() / fio->gbps : nan);
      if (fio && fio->gbps > 0 && r.config.block_size == (1 << 20) && r.config.queue_depth >= 16) {
        worst_target_ratio_ = std::min(worst_target_ratio_.value_or(1e9), p.gbps() / fio->gbps);
      }
    }
    report_.row(cells);
  }

  void tune() {
    auto score = [](const PointResult& r) { return tune_score(r.read.gbps(), r.write.gbps()); };
    auto best = std::max_element(results_.begin(), results_.end(),
                                 [&](const PointResult& a, const PointResult& b) { return score(a) < score(b); });
    if (best == results_.end()) throw Error(internal_error("tuning measured no configuration"));
    const nvme::IoConfig grid_best = best->config;
    for (const nvme::IoConfig& c : submit_mode_points(grid_best)) measure(c);
    best = std::max_element(results_.begin(), results_.end(),
                            [&](const PointResult& a, const PointResult& b) { return score(a) < score(b); });
    tuned_ = aio_block(best->config);
    report_.summary(
        "tuned (best harmonic mean of read and write GB/s)",
        format_rate(best->read.gbps() * 1e9) + " read, " + format_rate(best->write.gbps() * 1e9) + " write");
    report_.summary("aio", tuned_.dump());
  }

  void finish() {
    const PointResult* best_read = nullptr;
    const PointResult* best_write = nullptr;
    for (const PointResult& r : results_) {
      if (!best_read || r.read.gbps() > best_read->read.gbps()) best_read = &r;
      if (!best_write || r.write.gbps() > best_write->write.gbps()) best_write = &r;
    }
    if (best_read) report_.summary("best read", format_rate(best_read->read.gbps() * 1e9));
    if (best_write) report_.summary("best write", format_rate(best_write->write.gbps() * 1e9));
    if (worst_target_ratio_) {
      char text[96];
      std::snprintf(text, sizeof text, "%.3f (target >= 0.95: %s)", *worst_target_ratio_,
                    *worst_target_ratio_ >= 0.95 ? "met" : "NOT met");
      report_.summary("lowest tierzero/fio ratio at 1M, depth >= 16", text);
    }
    if (!fio_command_.empty()) report_.summary("fio command (last)", fio_command_);
    for (const std::string& note : skipped_) report_.summary("note", note);
    report_.end(all_verified_);
    if (flags_.tune) std::printf("%s\n", tuned_.dump(2).c_str());
    if (!flags_.update_config.empty()) {
      throw_if_error(write_aio_block(flags_.update_config, tuned_["aio"]));
      std::printf("# aio block written into %s (train reads it from there)\n", flags_.update_config.c_str());
    }
    if (!flags_.json.empty()) {
      throw_if_error(report_.write_json(flags_.json));
      if (flags_.tune) throw_if_error(add_tuned_block_to_json(flags_.json));
    }
    if (!all_verified_) throw ExitCode{1};
  }

  // Adds the tuned {"aio": {...}} block at the top level of the report's JSON file, as an
  // object a config can take as is.
  Status add_tuned_block_to_json(const std::string& path) const {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return corrupt("cannot re-read the JSON just written to " + path);
    j["aio"] = tuned_["aio"];
    std::ofstream out(path);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) return io_error("cannot write benchmark JSON to " + path + ": check the directory is writable");
    return {};
  }

  const BenchIoFlags& flags_;
  BenchReport report_;
  uint64_t size_ = 0;
  std::unique_ptr<ScopedPath> file_;
  std::string fio_;
  std::string fio_command_;
  std::string direct_text_;
  std::string dir_;
  std::vector<PointResult> results_;
  std::vector<std::string> skipped_;
  std::optional<double> worst_target_ratio_;
  nlohmann::json tuned_;
  bool all_verified_ = true;
};

}  // namespace

void add_bench_io_command(CLI::App& bench) {
  auto flags = std::make_shared<BenchIoFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "io", "NVMe/file I/O: sequential read and write GB/s, latency and CPU of the nvme/ engine (O_DIRECT)");
  flags->cmd = cmd;
  cmd->add_option("--nvme,--path", flags->path,
                  "Directory for the test file (default: current directory or /tmp, a disk preferred); --path is "
                  "the older name of --nvme, kept as an alias");
  cmd->add_option("--size", flags->size,
                  "Bytes per pass, e.g. 4GiB (default 1GiB; 256MiB per point with --sweep/--tune)");
  cmd->add_option("--backend", flags->backend, "auto | io_uring | libaio | sync (default auto)");
  cmd->add_option("--block-size", flags->block_size, "Request size, e.g. 1MiB (default 1MiB)");
  cmd->add_option("--buffers", flags->buffers,
                  "Request buffer memory: huge (2 MiB transparent huge pages, as the engine allocates) or small "
                  "(4 KiB pages, as fio's defaults) (default huge)")
      ->check(CLI::IsMember({"huge", "small"}));
  cmd->add_option("--queue-depth", flags->queue_depth, "Requests in flight per ring/thread (default 32)")
      ->check(whole_number_in(1, 4096));
  cmd->add_option("--threads", flags->threads,
                  "Rings/threads per request: intra_op_parallelism, fio numjobs (default 1)")
      ->check(whole_number_in(1, 256));
  cmd->add_option("--repeat", flags->repeat, "Runs per pass, median reported (default 1; 3 with --vs-fio)")
      ->check(whole_number_in(1, 1000));
  cmd->add_flag("--sweep", flags->sweep, "Sweep backend x block size x depth x threads (flags given stay fixed)");
  cmd->add_flag("--tune", flags->tune, "Sweep, then print the best DeepSpeed \"aio\" block");
  cmd->add_option("--update-config", flags->update_config,
                  "With --tune: write the tuned aio block into this ds_config JSON (other keys kept), for train");
  cmd->add_flag("--vs-fio", flags->vs_fio,
                "Also run fio (io_uring, direct) with the same parameters and print the ratio");
  cmd->add_flag(
      "--new-file", flags->new_file,
      "Write passes go to a new preallocated file each time (block allocation included), not over the laid-out one");
  cmd->add_flag("--end-fsync", flags->end_fsync, "Time an fdatasync at the end of each write pass (fio's end_fsync=1)");
  cmd->add_flag("--mixed", flags->mixed,
                "Also time reads and writes in turn, interleaved request by request (a pattern to compare with; "
                "`tierzero estimate` prices the disk at the read and write rows, since the optimizer's records move "
                "one direction at a time)");
  CLI::Option* pipeline =
      cmd->add_flag("--pipeline", flags->pipeline,
                    "Also time the NVMe optimizer's record pipeline inside the backward (32 records of --size / 16, "
                    "half kept in memory: the first half, then spread among the streamed) against the disk bound");
  cmd->add_option("--record-ms", flags->record_ms, "With --pipeline: milliseconds of CPU work per record (default 20)")
      ->check(CLI::Range(0.0, 10000.0))
      ->needs(pipeline);
  cmd->add_option("--pipeline-buffers", flags->pipeline_buffers,
                  "With --pipeline: the record buffers (offload_optimizer.buffer_count; default 4)")
      ->check(CLI::Range(1, 64))
      ->needs(pipeline);
  cmd->add_option("--json", flags->json, "Also write the results as JSON to this file");
  cmd->callback([flags] { BenchIo(*flags).run(); });
}

}  // namespace tierzero::tools
