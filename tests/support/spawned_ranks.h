// The processes of one multi-rank test: `world` copies of a program, each with its rank's
// environment and its output (stdout and stderr) in a log of its own.
//
//   SpawnedRanks ranks({.argv = {worker, "--steps", "4"}, .world = 2,
//                       .env = [&](int rank, int attempt) { return std::vector<std::string>{...}; },
//                       .log = [&](int rank) { return dir / ("rank" + std::to_string(rank) + ".log"); },
//                       .retry_when = "cannot form the process group"});
//   ASSERT_EQ(ranks.wait(240), "");
//
// A launch in which a rank fails with `retry_when` in its log (a process group that could not form:
// not what these tests check, and no training ran) is killed whole and launched again, up to
// kLaunchAttempts times, each failure on stderr.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tierzero::test_support {

struct RankLaunch {
  std::vector<std::string> argv;  // argv[0] the program's path
  int world = 2;
  // The variables rank `rank` gets in launch `attempt` (1, 2, ...) besides the test's own
  // environment, "NAME=value" each; one of them replaces the test's variable of that name.
  std::function<std::vector<std::string>(int rank, int attempt)> env;
  std::function<std::string(int rank)> log;  // where rank `rank` writes (truncated at each launch)
  std::string retry_when;                    // empty: never launched again
};

// "NAME=value", for RankLaunch::env.
std::string env_var(std::string_view name, std::string_view value);

class SpawnedRanks {
 public:
  static constexpr int kLaunchAttempts = 3;

  // Launches the ranks. A rank that cannot be started is a test failure (EXPECT) naming the program.
  explicit SpawnedRanks(RankLaunch launch);
  // Kills the ranks still running.
  ~SpawnedRanks();
  SpawnedRanks(const SpawnedRanks&) = delete;
  SpawnedRanks& operator=(const SpawnedRanks&) = delete;

  // True when every rank has exited (reaping those that did). A launch that failed as `retry_when`
  // says is killed and launched again here (then false).
  bool done();
  // Waits for every rank, killing those still running after `seconds`; failures() then.
  std::string wait(int seconds);
  // The exit status and log of each rank that failed (killed at the deadline: said so), or "".
  std::string failures() const;
  void kill_all();

 private:
  void launch();
  std::string log_text(int rank) const;
  bool exited_ok(int rank) const;

  RankLaunch launch_;
  std::vector<pid_t> pids_;  // -1 once reaped
  std::vector<int> status_;  // waitpid's status, -1 until reaped
  int attempts_ = 0;
  bool killed_ = false;  // by wait()'s deadline
};

}  // namespace tierzero::test_support
