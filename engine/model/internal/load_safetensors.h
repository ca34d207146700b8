// Loading one safetensors file into tensors; private to engine/model (load_hf_weights and tests).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>

#include "common/common.h"

namespace tierzero::engine {

// Copies every tensor of the safetensors file at `path` onto `device`, converted to `dtype`
// (nullopt: each keeps the file's dtype). The file is validated by checkpoint::SafetensorsFile
// (errors name the file and tensor); a dtype no weight uses is kUnsupported.
Result<std::map<std::string, at::Tensor>> load_safetensors_file(const std::string& path,
                                                                std::optional<at::ScalarType> dtype, at::Device device);

}  // namespace tierzero::engine
