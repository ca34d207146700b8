#include "tests/support/spawned_ranks.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace tierzero::test_support {
namespace {

// The test's environment with `extra` added, a variable of `extra` replacing the test's one.
std::vector<std::string> environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string variable(*e);
    const std::string name = variable.substr(0, variable.find('=') + 1);
    bool replaced = false;
    for (const std::string& v : extra) replaced = replaced || v.rfind(name, 0) == 0;
    if (!replaced) env.push_back(variable);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace

std::string env_var(std::string_view name, std::string_view value) {
  return std::string(name).append("=").append(value);
}

SpawnedRanks::SpawnedRanks(RankLaunch launch) : launch_(std::move(launch)) { this->launch(); }

SpawnedRanks::~SpawnedRanks() { kill_all(); }

void SpawnedRanks::launch() {
  ++attempts_;
  pids_.assign(static_cast<size_t>(launch_.world), -1);
  status_.assign(static_cast<size_t>(launch_.world), -1);
  for (int rank = 0; rank < launch_.world; ++rank) {
    std::vector<std::string> args = launch_.argv;
    std::vector<std::string> env = environment(launch_.env ? launch_.env(rank, attempts_) : std::vector<std::string>{});
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const std::string log = launch_.log(rank);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()), 0) << "cannot start " << argv[0];
    posix_spawn_file_actions_destroy(&actions);
    pids_[static_cast<size_t>(rank)] = pid;
  }
}

bool SpawnedRanks::done() {
  bool all = true, retry = false;
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (pids_[r] > 0 && waitpid(pids_[r], &status_[r], WNOHANG) == pids_[r]) {
      pids_[r] = -1;
      // Read as the rank exits: the others may wait for it until their own timeout.
      retry = retry || (!launch_.retry_when.empty() && !exited_ok(static_cast<int>(r)) &&
                        log_text(static_cast<int>(r)).find(launch_.retry_when) != std::string::npos);
    }
    all = all && pids_[r] <= 0;
  }
  if (!retry || attempts_ >= kLaunchAttempts) return all;
  kill_all();
  std::fprintf(stderr, "SpawnedRanks: launch %d of %d failed (\"%s\"); launching again:\n%s\n", attempts_,
               kLaunchAttempts, launch_.retry_when.c_str(), failures().c_str());
  launch();
  return false;
}

std::string SpawnedRanks::wait(int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  bool all = done();
  while (!all && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    all = done();
  }
  killed_ = !all;
  kill_all();
  return failures();
}

void SpawnedRanks::kill_all() {
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (pids_[r] <= 0) continue;
    kill(pids_[r], SIGKILL);
    waitpid(pids_[r], &status_[r], 0);
    pids_[r] = -1;
  }
}

std::string SpawnedRanks::log_text(int rank) const {
  std::ifstream log(launch_.log(rank));
  std::stringstream text;
  text << log.rdbuf();
  return text.str();
}

bool SpawnedRanks::exited_ok(int rank) const {
  const int status = status_[static_cast<size_t>(rank)];
  return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string SpawnedRanks::failures() const {
  std::string text;
  for (int r = 0; r < launch_.world; ++r)
    if (!exited_ok(r))
      text += "rank " + std::to_string(r) + (killed_ ? " (killed at the deadline)" : "") + " status " +
              std::to_string(status_[static_cast<size_t>(r)]) + ":\n" + log_text(r) + "\n";
  return text;
}

}  // namespace tierzero::test_support
