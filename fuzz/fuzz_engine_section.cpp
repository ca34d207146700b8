// libFuzzer harness: one section of an engine rank file read through a SectionCursor
// (checkpoint/engine_format/section_cursor.cpp): raw or one zstd frame, checksum checked at the end.
// Input: byte 0 bit 0 = compressed; bytes 1-2 = raw size (little endian, < 64 KiB); bytes 3-10 =
// the XXH3 the record claims; the rest is the rank file, one section covering all of it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "checkpoint/engine_format/internal/section_cursor.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero;
  if (size < 11) return 0;
  checkpoint::SectionRecord section;
  section.compressed = (data[0] & 1) != 0;
  section.raw_bytes = data[1] | (uint64_t{data[2]} << 8);
  std::memcpy(&section.xxh3, data + 3, 8);
  section.stored_bytes = size - 11;
  if (!section.compressed) section.raw_bytes = section.stored_bytes;
  const std::string path = fuzz::write_input_file("rank_00000.bin", data + 11, size - 11);
  auto file = checkpoint::RankFileHandle::open(path, 0, 1, size - 11);
  if (!file.ok()) return 0;
  checkpoint::SectionCursor cursor(*file, section, "fuzz section");
  std::vector<std::byte> out(section.raw_bytes);
  const size_t half = out.size() / 2;
  if (cursor.read(half, std::span(out).subspan(half)).ok()) {
    (void)cursor.read(0, std::span(out).first(half));  // behind the position: restarts
  }
  (void)cursor.finish();
  return 0;
}
