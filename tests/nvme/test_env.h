// Where the nvme tests put their files, and helpers shared by them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tierzero::nvme::testing {

// A fresh directory for one test: under $TIERZERO_TEST_NVME when set (point it at a real drive),
// else under the build tree's disk (the current directory) or /tmp. Removed on destruction.
class TestDir {
 public:
  TestDir();
  ~TestDir();
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// `bytes` pseudo-random bytes from `seed`.
std::vector<uint8_t> random_bytes(uint64_t bytes, uint64_t seed);

// Writes `data` to `path` with ordinary stdio (independent of the engine); false on failure.
bool write_plain_file(const std::string& path, const std::vector<uint8_t>& data);
// Reads all of `path` with ordinary stdio.
std::vector<uint8_t> read_plain_file(const std::string& path);

}  // namespace tierzero::nvme::testing
