// ElementType <-> at::ScalarType, both directions from one table.
#include <ATen/ATen.h>

#include <array>
#include <utility>

#include "engine/model/functional_model.h"

namespace tierzero::engine {
namespace {

constexpr std::array<std::pair<ElementType, at::ScalarType>, 12> kPairs{{
    {ElementType::kF64, at::kDouble},
    {ElementType::kF32, at::kFloat},
    {ElementType::kF16, at::kHalf},
    {ElementType::kBF16, at::kBFloat16},
    {ElementType::kF8E4M3, at::kFloat8_e4m3fn},
    {ElementType::kF8E5M2, at::kFloat8_e5m2},
    {ElementType::kI64, at::kLong},
    {ElementType::kI32, at::kInt},
    {ElementType::kI16, at::kShort},
    {ElementType::kI8, at::kChar},
    {ElementType::kU8, at::kByte},
    {ElementType::kBool, at::kBool},
}};

}  // namespace

std::optional<at::ScalarType> to_scalar_type(ElementType type) {
  for (const auto& [element, scalar] : kPairs) {
    if (element == type) return scalar;
  }
  return std::nullopt;
}

std::optional<ElementType> to_element_type(at::ScalarType type) {
  for (const auto& [element, scalar] : kPairs) {
    if (scalar == type) return element;
  }
  return std::nullopt;
}

}  // namespace tierzero::engine
