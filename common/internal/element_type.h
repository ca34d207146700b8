// The element types of tensors and buffers, one vocabulary for every layer: cpu_adam's kernels,
// offload's shards, the checkpoint formats and the engine (which maps them to at::ScalarType).
// File formats spell them their own way and map their names here: safetensors and the engine
// manifest ("BF16": checkpoint/dtype.h), torch.save storages ("BFloat16Storage": torch_format/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tierzero {

// Every element type the safetensors format defines (as of safetensors 0.6), which covers the types
// torch.save files, cpu_adam and offload use. Sub-byte types (F4, F6_*) are packed: a tensor of them
// occupies numel * bits / 8 bytes, which must be whole.
enum class ElementType : uint8_t {
  kBool,
  kF4,
  kF6E2M3,
  kF6E3M2,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kF8E8M0,
  kF8E4M3Fnuz,
  kF8E5M2Fnuz,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kC64,
  kF64,
  kI64,
  kU64,
};

// tierzero's short name of `type`, as its command lines and messages write it: "fp32", "bf16",
// "fp16", "fp64", "i64", "u8", "bool", "f8_e4m3", ...
const char* element_type_name(ElementType type);

// PyTorch's name of the dtype of `type` ("float32", "bfloat16", "int64", "bool", ...), as
// torch.dtype prints it and Hugging Face's config.json "torch_dtype" holds it.
const char* torch_dtype_name(ElementType type);

// Parses a name a user may type for a type: element_type_name()'s, torch_dtype_name()'s, or "f32"
// / "f16"; ASCII case is ignored. nullopt when unknown.
std::optional<ElementType> parse_element_type(std::string_view text);

// Bits per element: 8 for kBool, 4 for kF4, 6 for the F6 types, 8 * element_size otherwise.
uint32_t element_bits(ElementType type);

// Bytes per element of a type whose elements are whole bytes (every type but kF4 and the F6 types).
size_t element_size(ElementType type);

// Bytes occupied by `numel` elements of `type`; nullopt when that overflows uint64 or, for a packed
// sub-byte type, is not a whole number of bytes.
std::optional<uint64_t> element_bytes(ElementType type, uint64_t numel);

// True for the integer and bool types (kBool, kU8, kI8, kI16, kU16, kI32, kU32, kI64, kU64).
bool is_integer_type(ElementType type);

}  // namespace tierzero
