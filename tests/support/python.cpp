#include "tests/support/python.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace tierzero::test_support {
namespace {

// `word` in single quotes for the shell (a quote inside becomes '\'').
std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// What python_fixture_dir found for one out_dir: the directory, or "" and why not.
struct FixtureOutcome {
  std::string dir;
  std::string skip_reason;
};

}  // namespace

std::string python() {
  const char* env = std::getenv("TIERZERO_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

PythonRun run_python(const std::string& script, const std::vector<std::string>& args, const std::string& log) {
  std::string command = shell_quote(python()) + " " + shell_quote(script);
  for (const std::string& arg : args) command += " " + shell_quote(arg);
  command += " > " + shell_quote(log) + " 2>&1";
  const int status = std::system(command.c_str());
  PythonRun run;
  run.exit_code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::stringstream text;
  text << std::ifstream(log).rdbuf();
  run.output = text.str();
  return run;
}

std::string python_fixture_dir(const std::string& script, const std::string& out_dir, std::string& skip_reason) {
  static std::mutex mu;
  static std::map<std::string, FixtureOutcome> outcomes;  // by out_dir
  std::lock_guard lock(mu);
  auto found = outcomes.find(out_dir);
  if (found == outcomes.end()) {
    FixtureOutcome outcome;
    const PythonRun run = run_python(script, {"--out", out_dir}, out_dir + ".log");
    if (run.exit_code == kPythonSkip) {
      outcome.skip_reason = run.output;
    } else if (run.exit_code == kPythonMissing) {
      outcome.skip_reason = python() + " not found (set TIERZERO_PYTHON)";
    } else if (run.exit_code != 0) {
      ADD_FAILURE() << python() << " " << script << " --out " << out_dir << " failed with status " << run.exit_code
                    << ":\n"
                    << run.output;
      outcome.skip_reason = "fixture generation failed";
    } else {
      outcome.dir = out_dir;
    }
    found = outcomes.emplace(out_dir, std::move(outcome)).first;
  }
  skip_reason = found->second.skip_reason;
  return found->second.dir;
}

}  // namespace tierzero::test_support
