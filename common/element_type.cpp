#include "common/internal/element_type.h"

#include <array>
#include <cctype>
#include <limits>

namespace tierzero {
namespace {

struct TypeInfo {
  ElementType type;
  const char* name;
  const char* torch_name;
  uint32_t bits;
};

// In enum order.
constexpr std::array<TypeInfo, 22> kTypes{{
    {ElementType::kBool, "bool", "bool", 8},
    {ElementType::kF4, "f4", "float4_e2m1fn_x2", 4},
    {ElementType::kF6E2M3, "f6_e2m3", "float6_e2m3fn", 6},
    {ElementType::kF6E3M2, "f6_e3m2", "float6_e3m2fn", 6},
    {ElementType::kU8, "u8", "uint8", 8},
    {ElementType::kI8, "i8", "int8", 8},
    {ElementType::kF8E5M2, "f8_e5m2", "float8_e5m2", 8},
    {ElementType::kF8E4M3, "f8_e4m3", "float8_e4m3fn", 8},
    {ElementType::kF8E8M0, "f8_e8m0", "float8_e8m0fnu", 8},
    {ElementType::kF8E4M3Fnuz, "f8_e4m3fnuz", "float8_e4m3fnuz", 8},
    {ElementType::kF8E5M2Fnuz, "f8_e5m2fnuz", "float8_e5m2fnuz", 8},
    {ElementType::kI16, "i16", "int16", 16},
    {ElementType::kU16, "u16", "uint16", 16},
    {ElementType::kF16, "fp16", "float16", 16},
    {ElementType::kBF16, "bf16", "bfloat16", 16},
    {ElementType::kI32, "i32", "int32", 32},
    {ElementType::kU32, "u32", "uint32", 32},
    {ElementType::kF32, "fp32", "float32", 32},
    {ElementType::kC64, "c64", "complex64", 64},
    {ElementType::kF64, "fp64", "float64", 64},
    {ElementType::kI64, "i64", "int64", 64},
    {ElementType::kU64, "u64", "uint64", 64},
}};

const TypeInfo& info(ElementType type) { return kTypes[static_cast<size_t>(type)]; }

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

const char* element_type_name(ElementType type) { return info(type).name; }

const char* torch_dtype_name(ElementType type) { return info(type).torch_name; }

std::optional<ElementType> parse_element_type(std::string_view text) {
  if (equal_ignoring_case(text, "f32")) return ElementType::kF32;
  if (equal_ignoring_case(text, "f16")) return ElementType::kF16;
  for (const TypeInfo& i : kTypes) {
    if (equal_ignoring_case(text, i.name) || equal_ignoring_case(text, i.torch_name)) return i.type;
  }
  return std::nullopt;
}

uint32_t element_bits(ElementType type) { return info(type).bits; }

size_t element_size(ElementType type) { return info(type).bits / 8; }

std::optional<uint64_t> element_bytes(ElementType type, uint64_t numel) {
  const uint64_t bits = element_bits(type);
  if (numel > std::numeric_limits<uint64_t>::max() / bits) return std::nullopt;
  const uint64_t total_bits = numel * bits;
  if (total_bits % 8 != 0) return std::nullopt;
  return total_bits / 8;
}

bool is_integer_type(ElementType type) {
  switch (type) {
    case ElementType::kBool:
    case ElementType::kU8:
    case ElementType::kI8:
    case ElementType::kI16:
    case ElementType::kU16:
    case ElementType::kI32:
    case ElementType::kU32:
    case ElementType::kI64:
    case ElementType::kU64: return true;
    default: return false;
  }
}

}  // namespace tierzero
