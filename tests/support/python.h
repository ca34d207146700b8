// Python from the tests: the reference fixtures and cross-checks that transformers, tokenizers,
// torch and DeepSpeed write or read.
//
//   std::string skip;
//   const std::string dir = test_support::python_fixture_dir(SCRIPT, OUT_DIR, skip);
//   if (dir.empty()) GTEST_SKIP() << skip;
//   test_support::PythonRun run = test_support::run_python(CHECK_SCRIPT, {dir}, dir + ".check.log");
//
// A script exits with kPythonSkip (77) when a package it needs is missing, printing which.
#pragma once

#include <string>
#include <vector>

namespace tierzero::test_support {

// The exit code of a script that lacks a package it needs (the test skips, printing its output).
inline constexpr int kPythonSkip = 77;
// The shell's exit code when the interpreter itself is not found.
inline constexpr int kPythonMissing = 127;

// The interpreter: $TIERZERO_PYTHON when set and not empty, else python3.
std::string python();

// A finished script run.
struct PythonRun {
  int exit_code = -1;  // -1 when it did not exit normally (killed by a signal)
  std::string output;  // its stdout and stderr, interleaved
};

// Runs `python() script args...` (each word quoted for the shell) with stdout and stderr written
// to the file `log`, which is read back into the result.
PythonRun run_python(const std::string& script, const std::vector<std::string>& args, const std::string& log);

// Runs `python() script --out out_dir` once per test binary and out_dir (the script itself makes
// it a no-op when out_dir is up to date; its output goes to out_dir + ".log") and returns out_dir.
// Returns "" with `skip_reason` set when the script exits kPythonSkip (its output) or the
// interpreter is missing; any other failure is a test failure, reported once (ADD_FAILURE), and a
// skip after that.
std::string python_fixture_dir(const std::string& script, const std::string& out_dir, std::string& skip_reason);

}  // namespace tierzero::test_support
