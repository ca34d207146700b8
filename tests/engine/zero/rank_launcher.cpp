#include "rank_launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "engine/comm/comm.h"

extern char** environ;

namespace tierzero::engine::testing {
namespace {

constexpr int kLaunchAttempts = 3;

std::string read_log(const std::string& path) {
  std::ifstream log(path);
  std::stringstream text;
  text << log.rdbuf();
  return text.str();
}

// One launch of the scenario's ranks over a FileStore in `dir`: empty when every rank exited 0,
// else each failing rank's exit status and log. Sets `formation_failed` (and kills the other ranks
// at once, which would wait for it) when a rank failed to form the process group.
std::string launch_once(const Scenario& scenario, const std::string& dir, double loss_rtol, double param_atol,
                        int timeout_seconds, bool& formation_failed) {
  formation_failed = false;
  std::vector<std::string> args = scenario.to_args();
  args.insert(args.begin(), TIERZERO_ZERO_WORKER);

  std::vector<pid_t> pids;
  for (int rank = 0; rank < scenario.world_size; ++rank) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(scenario.world_size));
    env.push_back("TIERZERO_TEST_STORE=" + dir + "/store");
    env.push_back("TIERZERO_TEST_LOSS_RTOL=" + std::to_string(loss_rtol));
    env.push_back("TIERZERO_TEST_PARAM_ATOL=" + std::to_string(param_atol));
    env.push_back("OMP_NUM_THREADS=1");
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    std::string log = dir + "/rank" + std::to_string(rank) + ".log";
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return "cannot start " + args[0] + ": " + std::strerror(rc);
    pids.push_back(pid);
  }

  std::vector<int> statuses(pids.size(), -1);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  size_t running = pids.size();
  bool timed_out = false, killed = false;
  while (running > 0) {
    for (size_t r = 0; r < pids.size(); ++r) {
      if (statuses[r] != -1) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        statuses[r] = status;
        --running;
        // Read once, as the rank exits: a failure to form the group leaves the others waiting.
        formation_failed = formation_failed ||
                           (status != 0 && read_log(dir + "/rank" + std::to_string(r) + ".log").find(kGroupNotFormed) !=
                                               std::string::npos);
      }
    }
    if (running > 0 && !killed && (formation_failed || std::chrono::steady_clock::now() > deadline)) {
      killed = true;
      timed_out = !formation_failed;
      for (size_t r = 0; r < pids.size(); ++r)
        if (statuses[r] == -1) kill(pids[r], SIGKILL);
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::ostringstream report;
  for (size_t r = 0; r < pids.size(); ++r) {
    int status = statuses[r];
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
    report << "rank " << r << (timed_out ? " (killed at the deadline)" : "") << " exit status " << status << ":\n"
           << read_log(dir + "/rank" + std::to_string(r) + ".log") << "\n";
  }
  return report.str();
}

}  // namespace

std::string run_ranks(const Scenario& scenario, double loss_rtol, double param_atol, int timeout_seconds) {
  std::string report;
  for (int attempt = 1; attempt <= kLaunchAttempts; ++attempt) {
    const std::string dir = make_temp_dir();
    bool formation_failed = false;
    report = launch_once(scenario, dir, loss_rtol, param_atol, timeout_seconds, formation_failed);
    if (report.empty()) {
      remove_tree(dir);
      return report;
    }
    if (!formation_failed) return report;
    std::fprintf(stderr, "run_ranks: the ranks could not form their group (attempt %d of %d):\n%s", attempt,
                 kLaunchAttempts, report.c_str());
  }
  return report;
}

}  // namespace tierzero::engine::testing
