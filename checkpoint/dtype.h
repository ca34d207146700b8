// The names checkpoint files give element types: safetensors headers and the engine manifest both
// spell them as safetensors does ("F32", "BF16", "F8_E4M3", ...).
#pragma once

#include <optional>
#include <string_view>

#include "common/common.h"

namespace tierzero::checkpoint {

// The safetensors name of `dtype` ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(ElementType dtype);
// Parses a safetensors dtype name (exact, case sensitive); nullopt when unknown.
std::optional<ElementType> parse_dtype(std::string_view name);

}  // namespace tierzero::checkpoint
