// Where the nvme tests put their files, and helpers shared by them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace tierzero::nvme::testing {

// Where the nvme tests make their directories: $TIERZERO_TEST_NVME when it names a writable
// directory (point it at a real drive), else the build tree's disk (the current directory), else
// $TMPDIR or /tmp.
std::string test_root();

// A fresh directory tierzero-nvme-test-XXXXXX under test_root(), removed on destruction.
struct TestDir : test_support::ScratchDir {
  TestDir() : test_support::ScratchDir("tierzero-nvme-test", test_root()) {}
};

// `bytes` pseudo-random bytes from `seed`.
std::vector<uint8_t> random_bytes(uint64_t bytes, uint64_t seed);

// Writes `data` to `path` with ordinary stdio (independent of the engine); false on failure.
bool write_plain_file(const std::string& path, const std::vector<uint8_t>& data);
// Reads all of `path` with ordinary stdio.
std::vector<uint8_t> read_plain_file(const std::string& path);

}  // namespace tierzero::nvme::testing
