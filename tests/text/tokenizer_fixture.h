// The Hugging Face `tokenizers` reference fixture (make_tokenizer_fixture.py), built once per
// build tree with $TIERZERO_PYTHON (default python3).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tierzero::text::testing {

// The fixture directory, or "" with `skip_reason` set when the interpreter or the `tokenizers`
// package is missing (a failing script is a test failure, reported once).
std::string tokenizer_fixture_dir(std::string& skip_reason);

// Each line of a JSONL file, parsed.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace tierzero::text::testing

#define REQUIRE_TOKENIZER_FIXTURE(dir_var)                                                    \
  std::string skip_reason_;                                                                   \
  const std::string dir_var = ::tierzero::text::testing::tokenizer_fixture_dir(skip_reason_); \
  if (dir_var.empty()) GTEST_SKIP() << skip_reason_
