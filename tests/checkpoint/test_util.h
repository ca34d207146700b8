// Helpers shared by the checkpoint tests: scratch directories, file surgery, Python checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace tierzero::checkpoint::testing {

// The checkpoint tests' scratch directory: ckpt_test-XXXXXX on the build tree's disk (the current
// directory under ctest; checkpoints want a real disk), removed on destruction.
struct ScratchDir : test_support::ScratchDir {
  ScratchDir() : test_support::ScratchDir("ckpt_test", test_support::working_dir_root()) {}
};

std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);
void write_text(const std::string& path, const std::string& text);
std::string read_text(const std::string& path);

// The interpreter for Python interop tests: $TIERZERO_PYTHON, else python3.
std::string python();
// Runs `python() script args`; returns its exit code, with stdout+stderr in `output`.
int run_python(const std::string& script, const std::string& args, std::string& output);
// The path of a file in tests/checkpoint/ of the source tree.
std::string source_file(const std::string& name);

}  // namespace tierzero::checkpoint::testing
