// fio as the peer of `tierzero bench io`.
#include "tools/bench_io_fio.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

extern char** environ;

namespace tierzero::tools {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv to completion with stdout and stderr sent to files; returns its exit status.
Result<int> run_command(const std::vector<std::string>& args, const std::string& out_path,
                        const std::string& err_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) return errno_status(err, "cannot run " + args[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return errno_status(errno, "waitpid for " + args[0]);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

double percentile_us(const nlohmann::json& lat, const char* key) {
  if (!lat.contains("percentile") || !lat["percentile"].contains(key)) return 0;
  return lat["percentile"][key].get<double>() / 1000.0;
}

}  // namespace

std::string find_fio() {
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      const std::string candidate = dir + "/fio";
      if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return access("/usr/bin/fio", X_OK) == 0 ? "/usr/bin/fio" : "";
}

Result<FioResult> run_fio(const FioJob& job) {
  const uint64_t per_job = job.size / job.numjobs / job.block_size * job.block_size;
  if (per_job == 0) return invalid_argument("fio comparison: --size is smaller than one block per job");
  std::vector<std::string> args = {job.fio,
                                   "--name=tierzero-vs-fio",
                                   "--filename=" + job.file,
                                   std::string("--rw=") + (job.write ? "write" : "read"),
                                   "--ioengine=io_uring",
                                   "--direct=1",
                                   "--bs=" + std::to_string(job.block_size),
                                   "--iodepth=" + std::to_string(job.iodepth),
                                   "--numjobs=" + std::to_string(job.numjobs),
                                   "--size=" + std::to_string(per_job),
                                   "--offset_increment=" + std::to_string(per_job),
                                   "--group_reporting=1",
                                   "--lat_percentiles=1",
                                   "--percentile_list=50:99",
                                   "--output-format=json"};
  if (job.write && job.end_fsync) args.push_back("--end_fsync=1");
  if (job.write && job.new_file) args.push_back("--fallocate=native");
  FioResult result;
  for (const std::string& a : args) result.command += (result.command.empty() ? "" : " ") + a;
  const std::string stem = std::filesystem::temp_directory_path() / ("tierzero-fio-" + std::to_string(getpid()));
  const std::string out_path = stem + ".json", err_path = stem + ".err";
  Result<int> rc = run_command(args, out_path, err_path);
  const std::string out = read_text(out_path), err = read_text(err_path);
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  if (!rc.ok()) return rc.status();
  if (*rc != 0)
    return io_error("fio exited with " + std::to_string(*rc) + ": " + err + "\n  command: " + result.command);
  // fio may print notices before the JSON document.
  const size_t brace = out.find('{');
  nlohmann::json j = nlohmann::json::parse(brace == std::string::npos ? "" : out.substr(brace), nullptr, false);
  if (j.is_discarded() || !j.contains("jobs") || j["jobs"].empty()) {
    return corrupt("cannot parse fio's JSON output (fio 3.x expected); command: " + result.command);
  }
  const nlohmann::json& jobj = j["jobs"][0];
  const nlohmann::json& side = jobj[job.write ? "write" : "read"];
  result.gbps = side.value("bw_bytes", 0.0) / 1e9;
  result.p50_us = percentile_us(side["lat_ns"], "50.000000");
  result.p99_us = percentile_us(side["lat_ns"], "99.000000");
  result.cpu_percent = jobj.value("usr_cpu", 0.0) + jobj.value("sys_cpu", 0.0);
  return result;
}

}  // namespace tierzero::tools
