// `tierzero bench save`: the periodic save's copy of the state into its write-behind buffers, GB/s at
// each thread count through the save's write path, every checkpoint read back and compared; the
// footer gives what the write path costs one core per byte (bench_save_copy.h).
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/common.h"
#include "tools/bench_save_copy.h"
#include "tools/cli_checks.h"
#include "tools/commands.h"

namespace tierzero::tools {
namespace {

struct BenchSaveFlags {
  std::string dir = "/tmp";
  std::string size = "1GiB";
  std::vector<int> threads;  // empty: 1, 2, 4, ... and every core
  std::string json;
};

std::vector<int> thread_counts(const BenchSaveFlags& flags) {
  if (!flags.threads.empty()) return flags.threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> counts;
  for (int t = 1; t < cores; t *= 2) counts.push_back(t);
  counts.push_back(cores);
  return counts;
}

void run_bench_save(const BenchSaveFlags& flags) {
  const uint64_t size = value_or_throw(parse_bytes(flags.size));
  if (size < (1u << 20)) throw Error(invalid_argument("--size " + flags.size + ": give at least 1MiB"));
  const std::string dir = flags.dir + "/tierzero-bench-save." + std::to_string(getpid());
  const SaveCopyState state(size);
  const std::unique_ptr<checkpoint::WriteBuffers> buffers =
      value_or_throw(checkpoint::WriteBuffers::create(state.bytes() + (1u << 20)));

  BenchReport report("tierzero bench save");
  report.param("state", fmt::format("{} (3 fp32 states of {} elements, saved in 8 records)",
                                    format_bytes(state.bytes()), state.numel()));
  report.param("write-behind", fmt::format("{} (the whole rank file: the copy never waits for the disk)",
                                           format_bytes(buffers->bytes())));
  report.param("dir", dir);
  report.begin({{"threads", 8, 0},
                {"copy_GB/s", 10},
                {"copy_s", 8, 3},
                {"written_s", 10, 3},
                {"disk_GB/s", 10},
                {"vs_1_thread", 12},
                {"bytes_equal", 12}});
  bool all_equal = true;
  double one_thread = 0, best = 0;
  for (const int threads : thread_counts(flags)) {
    const std::string tag = "global_step" + std::to_string(threads);
    const SaveCopyResult r = value_or_throw(run_save_copy(state, *buffers, dir, tag, threads));
    std::filesystem::remove_all(dir + "/" + tag);
    const double gbps = static_cast<double>(state.bytes()) / 1e9 / r.copy_seconds;
    if (one_thread == 0) one_thread = gbps;
    best = std::max(best, gbps);
    all_equal = all_equal && r.equal;
    report.row({int64_t{threads}, gbps, r.copy_seconds, r.write_seconds,
                static_cast<double>(state.bytes()) / 1e9 / r.write_seconds, gbps / one_thread,
                std::string(r.equal ? "yes" : "NO")});
  }
  std::filesystem::remove_all(dir);
  const ByteCosts costs = measure_byte_costs(state.state(0));
  report.summary("one core, per byte", fmt::format("memcpy {:.2f} GB/s, XXH3 {:.2f} GB/s, copy + 2 XXH3 (the former "
                                                   "fill, hashing for its section and its file) {:.2f} GB/s",
                                                   costs.memcpy_gbps, costs.xxh3_gbps, costs.copy_and_two_hashes_gbps));
  report.summary("best copy vs the former fill",
                 fmt::format("{:.2f} GB/s / {:.2f} GB/s = {:.2f}x", best, costs.copy_and_two_hashes_gbps,
                             best / costs.copy_and_two_hashes_gbps));
  report.end(all_equal);
  if (!flags.json.empty()) throw_if_error(report.write_json(flags.json));
  if (!all_equal) throw ExitCode{1};
}

}  // namespace

void add_bench_save_command(CLI::App& bench) {
  auto flags = std::make_shared<BenchSaveFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "save", "A periodic save's copy of the state into its write-behind buffers: GB/s by threads, bytes checked");
  cmd->add_option("--dir", flags->dir, "Directory the checkpoints are written under (default /tmp)");
  cmd->add_option("--size", flags->size, "State bytes, e.g. 4GiB (default 1GiB; as much again for the buffers)");
  cmd->add_option("--threads", flags->threads, "Thread counts to time (default 1, 2, 4, ... and every core)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--json", flags->json, "Also write the results as JSON to this file");
  cmd->callback([flags] { run_bench_save(*flags); });
}

}  // namespace tierzero::tools
