// DeepSpeed checkpoint fixtures for the import tests, made by make_deepspeed_fixture.py (torch)
// and checked against DeepSpeed's own zero_to_fp32 by deepspeed_reference.py.
//
// ctest runs every test in its own process, so the fixtures are generated once into a cache
// folder under the temp directory named after a hash of the two scripts and the interpreter;
// the first process builds it in a private folder and renames it into place (atomic), later ones
// reuse it. The cache also remembers "deepspeed not importable": after installing deepspeed,
// remove $TMPDIR/tierzero-deepspeed-fixtures-* to get the zero_to_fp32 comparison.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tierzero::checkpoint::testing {

// The fixtures every import test reads: built from torch, expected to match DeepSpeed.
inline const std::vector<std::string> kGoodFixtures = {"s3_w1_bf16",       "s3_w2_fp16", "s3_w3_bf16",
                                                       "s3_w8_fp16",       "s2_w1_fp16", "s2_w2_bf16",
                                                       "s2_w3_fp16_nopad", "s1_w8_bf16", "s2_w8_bf16"};

struct DeepSpeedFixtures {
  std::string dir;              // one folder per fixture; empty when they could not be made
  std::string skip_reason;      // why `dir` is empty when that is the machine's fault (no torch)
  std::string error;            // why `dir` is empty when the generator failed (a test failure)
  std::string reference_skip;   // non-empty when DeepSpeed is not importable: no ref.* files
  std::string reference_error;  // non-empty when zero_to_fp32 failed on a fixture
};

// The fixtures, generated on first use in this process (or found in the cache).
const DeepSpeedFixtures& deepspeed_fixtures();

// A consolidated state dict dumped by the scripts (truth.* or ref.*).
struct DumpedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
};
struct StateDump {
  std::vector<DumpedTensor> tensors;
  std::vector<std::pair<std::string, std::string>> aliases;
};

// Reads DIR/STEM.json + DIR/STEM.bin; throws std::runtime_error when they are missing or short.
StateDump read_state_dump(const std::string& dir, const std::string& stem);

// Copies the folder `from` to `to` (recursively; `to` must not exist).
void copy_tree(const std::string& from, const std::string& to);

}  // namespace tierzero::checkpoint::testing
