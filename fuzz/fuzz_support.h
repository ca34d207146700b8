// Shared by the harnesses: the fuzzer's bytes as a file on disk (the readers under test open
// paths), and a bounded walk that touches what a reader returned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tierzero::fuzz {

// Writes `data` to NAME inside a private directory of this process (under /dev/shm when it
// exists, else $TMPDIR or /tmp), replacing the previous content, and returns the path. The
// directory is created on first use and removed at exit. Aborts (the harness's own invariant,
// not the reader's) when the file cannot be written.
std::string write_input_file(const std::string& name, const uint8_t* data, size_t size);

// The private directory write_input_file uses, created on first call.
const std::string& scratch_dir();

}  // namespace tierzero::fuzz
