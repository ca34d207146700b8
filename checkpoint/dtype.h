// Element types of tensors in checkpoint files, named as safetensors names them.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tierzero::checkpoint {

// Every dtype the safetensors format defines (as of safetensors 0.6). Sub-byte types (F4, F6_*)
// are packed: a tensor of them occupies numel * bits / 8 bytes, which must be whole.
enum class DType : uint8_t {
  kBool, kF4, kF6E2M3, kF6E3M2, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0, kF8E4M3Fnuz, kF8E5M2Fnuz,
  kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kC64, kF64, kI64, kU64,
};

// The safetensors name of `dtype` ("F32", "BF16", "F8_E4M3", ...).
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype name (exact, case sensitive); nullopt when unknown.
std::optional<DType> parse_dtype(std::string_view name);
// Bits per element: 1 byte for BOOL, 4 for F4, 6 for F6_*, 8 * itemsize otherwise.
uint32_t dtype_bits(DType dtype);

// True for the integer and bool dtypes (BOOL, U8, I8, I16, U16, I32, U32, I64, U64).
bool is_integer_dtype(DType dtype);

// Bytes occupied by `numel` elements of `dtype`; nullopt when that overflows uint64 or, for a
// packed sub-byte type, is not a whole number of bytes.
std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t numel);

}  // namespace tierzero::checkpoint
