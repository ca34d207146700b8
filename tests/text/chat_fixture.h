// The chat-template reference fixture (make_chat_fixture.py: transformers' apply_chat_template on
// real tokenizers and llama.cpp's real chat templates), built once per build tree.
#pragma once

#include <string>

namespace tierzero::text::testing {

// The fixture directory, or "" with `skip_reason` set when the interpreter, a package or the
// llama-cpp-python sdist is missing (tests/support/python.h's python_fixture_dir). The script
// reads the sdist CMake built the Jinja engine from (TIERZERO_LLAMA_CPP_SDIST).
std::string chat_fixture_dir(std::string& skip_reason);

}  // namespace tierzero::text::testing

#define REQUIRE_CHAT_FIXTURE(dir_var)                                                    \
  std::string skip_reason_;                                                              \
  const std::string dir_var = ::tierzero::text::testing::chat_fixture_dir(skip_reason_); \
  if (dir_var.empty()) GTEST_SKIP() << skip_reason_
