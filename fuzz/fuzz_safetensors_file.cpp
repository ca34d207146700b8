// libFuzzer harness: a whole safetensors file, mapped and validated
// (checkpoint/safetensors/safetensors_reader.cpp); every tensor is looked up and its bytes summed.
#include <cstddef>
#include <cstdint>

#include "checkpoint/safetensors/safetensors.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero;
  const std::string path = fuzz::write_input_file("input.safetensors", data, size);
  auto file = checkpoint::SafetensorsFile::open(path);
  if (!file.ok()) return 0;
  unsigned sum = 0;
  for (const auto& t : (*file)->header().tensors) {
    if ((*file)->find(t.name) == nullptr) __builtin_trap();
    for (std::byte b : (*file)->data(t)) sum += static_cast<unsigned>(b);
  }
  return static_cast<int>(sum & 0);
}
