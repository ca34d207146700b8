// Testing only: runs an operation with a power loss before each of its file-system steps in turn
// (and once after its last), and checks every image a crash may leave (FaultInjectionFs).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/common.h"

namespace tierzero::fs::testing {

struct CrashScenario {
  std::string root;                   // an existing directory the scenario owns
  std::function<void()> prepare;      // builds the starting state under root (real file system)
  std::function<Status()> operation;  // runs on the double (fs::default_file_system())
  // Appends what is wrong with the tree under root after a crash; `finished`: the operation had
  // returned ok before the power went (its output must then be durable).
  std::function<void(bool finished, std::vector<std::string>& problems)> check;
};

struct CrashReport {
  size_t steps = 0;                   // file-system steps of one clean run
  size_t crash_points = 0;            // steps + 1 (power lost before each step, and after the last)
  size_t images = 0;                  // crash images checked, over all crash points
  std::vector<std::string> problems;  // each prefixed with its crash point and image
};

// A fresh, empty directory for a crash scenario, removed on destruction: under
// $TIERZERO_CRASH_DIR when set, else /dev/shm when writable (the double models durability itself,
// so the real disk's fsyncs only cost time), else the current directory.
class ScratchRoot {
 public:
  ScratchRoot();
  ~ScratchRoot();
  ScratchRoot(const ScratchRoot&) = delete;
  ScratchRoot& operator=(const ScratchRoot&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Clean run first (its failure is a problem), then for k = 0..steps: root emptied, prepare(),
// operation() with power lost before step k, then check() on each image (restore_image).
CrashReport crash_at_every_step(const CrashScenario& scenario);

// The regular files under `dir`, by path relative to it, with their bytes (empty map: missing).
std::map<std::string, std::string> files_under(const std::string& dir);

}  // namespace tierzero::fs::testing
