// Helpers shared by the checkpoint tests: scratch directories, file surgery, Python checks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/convert/consolidate.h"
#include "tests/support/python.h"
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

using test_support::python;
using test_support::run_python;
// The path of a file in tests/checkpoint/ of the source tree.
std::string source_file(const std::string& name);

// What a conversion of a checkpoint makes of it: the error of opening it (`opened`), else the status
// of converting it to `out_dir` as `dtype` (no progress bar).
Status convert_status(Result<std::unique_ptr<ConsolidationSource>> opened, const std::string& out_dir,
                      ElementType dtype);

}  // namespace tierzero::checkpoint::testing
