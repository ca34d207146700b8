// libFuzzer harness: the zip reader (checkpoint/torch_format/zip_reader.cpp) on an arbitrary
// file; every entry found is looked up by name and its first and last bytes read.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "checkpoint/torch_format/internal/zip_reader.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero;
  const std::string path = fuzz::write_input_file("input.zip", data, size);
  auto zip = checkpoint::ZipArchive::open(path);
  if (!zip.ok()) return 0;
  std::vector<std::byte> buffer(64);
  for (const checkpoint::ZipEntry& e : zip->entries()) {
    if (zip->find(e.name) == nullptr) __builtin_trap();  // an entry listed must be found
    const uint64_t n = std::min<uint64_t>(e.size, buffer.size());
    (void)zip->read(e, 0, std::span(buffer).first(n));
    (void)zip->read(e, e.size - n, std::span(buffer).first(n));
    (void)zip->read(e, e.size, std::span(buffer).first(1));  // past the end: must be refused
  }
  return 0;
}
