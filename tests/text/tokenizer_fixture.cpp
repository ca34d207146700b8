// Runs make_tokenizer_fixture.py (a no-op when its STAMP is up to date).
#include "tests/text/tokenizer_fixture.h"

#include <fstream>

#include "tests/support/python.h"

namespace tierzero::text::testing {

std::string tokenizer_fixture_dir(std::string& skip_reason) {
  return test_support::python_fixture_dir(TIERZERO_TOKENIZER_FIXTURE_SCRIPT, TIERZERO_TOKENIZER_FIXTURE_DIR,
                                          skip_reason);
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

}  // namespace tierzero::text::testing
