// libFuzzer harness: safetensors header validation (checkpoint/safetensors/safetensors_header.cpp).
// The first 8 bytes give the data section's size, the rest is the header JSON.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "checkpoint/safetensors/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero;
  if (size < 8) return 0;
  uint64_t data_bytes = 0;
  std::memcpy(&data_bytes, data, 8);
  const std::string_view json(reinterpret_cast<const char*>(data + 8), size - 8);
  auto header = checkpoint::parse_safetensors_header(json, data_bytes, "fuzz.safetensors");
  if (!header.ok()) return 0;
  uint64_t end = 0;
  for (const auto& t : header->tensors) {
    if (t.begin != end || t.end < t.begin) __builtin_trap();  // the ranges must tile the data
    end = t.end;
  }
  if (end != data_bytes) __builtin_trap();
  return 0;
}
