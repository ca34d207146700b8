// Helpers shared by the checkpoint tests: scratch directories, file surgery, Python checks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierzero::checkpoint::testing {

// A fresh directory under the current directory (the build tree's disk), removed on destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
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
