// Safetensors files written by hand for the loading tests: the format's bytes (an 8-byte header
// length, the JSON header, the tensors' bytes in order) from tensors the test holds, independent of
// the reader under test.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

namespace tierzero::engine::testing {

// Writes `tensors` (contiguous CPU bf16 / fp16 / fp32 tensors) as the safetensors file `path`, in
// name order (a failed test when it cannot be written).
void write_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors);

}  // namespace tierzero::engine::testing
