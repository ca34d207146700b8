// A multi-rank trainer test's ranks: kWorld train_worker processes (train_worker.cpp) under
// torchrun's environment on the loopback interface, CUDA hidden (Gloo on the CPU), each rank's
// output in DIR/NAME.rankR.log. Header-only: TIERZERO_TRAIN_WORKER is the test target's.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/comm.h"
#include "train_fixture.h"

extern char** environ;

namespace tierzero::engine::testing {

inline constexpr int kWorld = 2;

// kWorld workers with `args`, each rank's output in DIR/NAME.rankR.log. A launch whose group could
// not form (a rank's log holds Comm::create's kGroupNotFormed: a loopback connect once failed so on
// the CI box) is launched again on a fresh port, up to kLaunchAttempts times, each failure on
// stderr: that is not what these tests check, and no training ran.
class Ranks {
 public:
  static constexpr int kLaunchAttempts = 3;

  Ranks(const ScratchDir& dir, const std::string& name, std::vector<std::string> args) : args_(std::move(args)) {
    args_.insert(args_.begin(), TIERZERO_TRAIN_WORKER);
    for (int rank = 0; rank < kWorld; ++rank) logs_.push_back(dir / (name + ".rank" + std::to_string(rank) + ".log"));
    launch();
  }
  ~Ranks() { kill_all(); }

  // True when every rank has exited (reaping those that did); statuses in status_. A launch whose
  // group did not form is relaunched here (then false).
  bool done() {
    bool all = true;
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] > 0 && waitpid(pids_[r], &status_[r], WNOHANG) == pids_[r]) pids_[r] = -1;
      all = all && pids_[r] <= 0;
    }
    if (!all || attempts_ >= kLaunchAttempts || !group_failed()) return all;
    fprintf(stderr, "Ranks: launch %d of %d could not form the process group; launching again:\n%s\n", attempts_,
            kLaunchAttempts, failures().c_str());
    launch();
    return false;
  }
  // Waits for every rank (killing them after `seconds`); the logs of those that failed, or "".
  std::string wait(int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    kill_all();
    return failures();
  }
  void kill_all() {
    for (pid_t& pid : pids_) {
      if (pid <= 0) continue;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }

 private:
  // Spawns the kWorld ranks on a fresh port, truncating their logs.
  void launch() {
    ++attempts_;
    pids_.clear();
    const int port = free_port();
    for (int rank = 0; rank < kWorld; ++rank) {
      status_[rank] = -1;
      std::vector<std::string> env;
      // CUDA hidden: the ranks run on the CPU over Gloo, also on a machine with one GPU.
      for (char** e = environ; *e != nullptr; ++e)
        if (std::string(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0) env.emplace_back(*e);
      for (std::string v : {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank),
                            std::string("CUDA_VISIBLE_DEVICES="), "WORLD_SIZE=" + std::to_string(kWorld),
                            std::string("MASTER_ADDR=127.0.0.1"), "MASTER_PORT=" + std::to_string(port),
                            std::string("OMP_NUM_THREADS=1"), std::string("TORCH_FR_BUFFER_SIZE=0")})
        env.push_back(v);
      std::vector<char*> argv, envp;
      for (std::string& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      for (std::string& e : env) envp.push_back(e.data());
      envp.push_back(nullptr);
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      posix_spawn_file_actions_addopen(&actions, 1, logs_[rank].c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
      pid_t pid = 0;
      EXPECT_EQ(posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data()), 0) << argv[0];
      posix_spawn_file_actions_destroy(&actions);
      pids_.push_back(pid);
    }
  }
  std::string log_text(int rank) const {
    std::ifstream log(logs_[rank]);
    std::stringstream text;
    text << log.rdbuf();
    return text.str();
  }
  bool exited_ok(int rank) const { return WIFEXITED(status_[rank]) && WEXITSTATUS(status_[rank]) == 0; }
  // Whether a rank that failed says its group could not form.
  bool group_failed() const {
    for (int r = 0; r < kWorld; ++r)
      if (!exited_ok(r) && log_text(r).find(kGroupNotFormed) != std::string::npos) return true;
    return false;
  }
  // The exit status and log of each rank that failed, or "".
  std::string failures() const {
    std::string text;
    for (int r = 0; r < kWorld; ++r)
      if (!exited_ok(r))
        text += "rank " + std::to_string(r) + " status " + std::to_string(status_[r]) + ":\n" + log_text(r);
    return text;
  }

  std::vector<std::string> args_;
  std::vector<pid_t> pids_;
  std::vector<std::string> logs_;
  int status_[kWorld] = {-1, -1};
  int attempts_ = 0;
};

}  // namespace tierzero::engine::testing
