// Runs make_tokenizer_fixture.py (a no-op when its STAMP is up to date).
#include "tests/text/tokenizer_fixture.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tierzero::text::testing {

std::string tokenizer_fixture_dir(std::string& skip_reason) {
  static std::string dir, reason;
  static bool done = false;
  if (!done) {
    done = true;
    const char* env_python = std::getenv("TIERZERO_PYTHON");
    const std::string python = env_python && *env_python ? env_python : "python3";
    const std::string log = std::string(TIERZERO_TOKENIZER_FIXTURE_DIR) + ".log";
    const std::string command = "'" + python + "' '" TIERZERO_TOKENIZER_FIXTURE_SCRIPT "' --out '" +
                                std::string(TIERZERO_TOKENIZER_FIXTURE_DIR) + "' > '" + log + "' 2>&1";
    const int status = std::system(command.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::stringstream text;
    text << std::ifstream(log).rdbuf();
    if (code == 77 || code == 127) {
      reason = code == 77 ? text.str() : python + " not found (set TIERZERO_PYTHON)";
    } else if (code != 0) {
      ADD_FAILURE() << command << " failed with status " << code << ":\n" << text.str();
      reason = "fixture generation failed";
    } else {
      dir = TIERZERO_TOKENIZER_FIXTURE_DIR;
    }
  }
  skip_reason = reason;
  return dir;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace tierzero::text::testing
