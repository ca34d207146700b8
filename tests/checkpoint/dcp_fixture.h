// PyTorch DCP checkpoints for the DCP tests, written by torch itself
// (tests/checkpoint/dcp/make_dcp_checkpoint.py, gloo ranks on CPU) with dcp_to_torch_save's result
// beside them as ref.safetensors.
//
// ctest runs every test in its own process, so each checkpoint is written once per script version
// and interpreter into $TMPDIR/tierzero-dcp-HASH-wWORLD: a private folder renamed into place.
#pragma once

#include <string>

namespace tierzero::checkpoint::testing {

struct DcpFixture {
  std::string dir;    // the checkpoint folder; empty when it could not be made
  std::string skip;   // why `dir` is empty when that is the machine's fault (no torch)
  std::string error;  // why `dir` is empty when the script failed (a test failure)
};

// The checkpoint written by `world` ranks, made on first use.
DcpFixture dcp_fixture(int world);

}  // namespace tierzero::checkpoint::testing
