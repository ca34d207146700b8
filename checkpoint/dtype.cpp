#include "checkpoint/dtype.h"

#include <array>

namespace tierzero::checkpoint {
namespace {

// In ElementType's order.
constexpr std::array<std::string_view, 22> kNames{
    "BOOL", "F4",  "F6_E2M3", "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
    "I16",  "U16", "F16",     "BF16",    "I32", "U32", "F32",     "C64",     "F64",     "I64",         "U64",
};

}  // namespace

std::string_view dtype_name(ElementType dtype) { return kNames[static_cast<size_t>(dtype)]; }

std::optional<ElementType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ElementType>(i);
  }
  return std::nullopt;
}

}  // namespace tierzero::checkpoint
