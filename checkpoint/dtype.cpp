#include "checkpoint/dtype.h"

#include <array>
#include <limits>

namespace tierzero::checkpoint {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  uint32_t bits;
};

constexpr std::array<DTypeInfo, 22> kDTypes{{
    {DType::kBool, "BOOL", 8},        {DType::kF4, "F4", 4},
    {DType::kF6E2M3, "F6_E2M3", 6},   {DType::kF6E3M2, "F6_E3M2", 6},
    {DType::kU8, "U8", 8},            {DType::kI8, "I8", 8},
    {DType::kF8E5M2, "F8_E5M2", 8},   {DType::kF8E4M3, "F8_E4M3", 8},
    {DType::kF8E8M0, "F8_E8M0", 8},   {DType::kF8E4M3Fnuz, "F8_E4M3FNUZ", 8},
    {DType::kF8E5M2Fnuz, "F8_E5M2FNUZ", 8},
    {DType::kI16, "I16", 16},         {DType::kU16, "U16", 16},
    {DType::kF16, "F16", 16},         {DType::kBF16, "BF16", 16},
    {DType::kI32, "I32", 32},         {DType::kU32, "U32", 32},
    {DType::kF32, "F32", 32},         {DType::kC64, "C64", 64},
    {DType::kF64, "F64", 64},         {DType::kI64, "I64", 64},
    {DType::kU64, "U64", 64},
}};

const DTypeInfo& info(DType dtype) { return kDTypes[static_cast<size_t>(dtype)]; }

}  // namespace

std::string_view dtype_name(DType dtype) { return info(dtype).name; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& i : kDTypes) {
    if (i.name == name) return i.dtype;
  }
  return std::nullopt;
}

uint32_t dtype_bits(DType dtype) { return info(dtype).bits; }

bool is_integer_dtype(DType dtype) {
  switch (dtype) {
    case DType::kBool: case DType::kU8: case DType::kI8: case DType::kI16: case DType::kU16:
    case DType::kI32: case DType::kU32: case DType::kI64: case DType::kU64:
      return true;
    default:
      return false;
  }
}

std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t numel) {
  const uint64_t bits = dtype_bits(dtype);
  if (numel > std::numeric_limits<uint64_t>::max() / bits) return std::nullopt;
  const uint64_t total_bits = numel * bits;
  if (total_bits % 8 != 0) return std::nullopt;
  return total_bits / 8;
}

}  // namespace tierzero::checkpoint
