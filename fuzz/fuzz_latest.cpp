// libFuzzer harness: a checkpoint folder's pointer files (checkpoint/engine_format/latest_pointer.cpp):
// DIR/latest (DeepSpeed's plain tag text) and DIR/latest.xxh3 (the tag under a checksum).
// Input: byte 0 = n, the length of `latest` (0 = no such file, else n - 1 bytes); the rest is
// latest.xxh3 (absent when empty). Properties: latest.xxh3 text that parses is exactly what the
// writer produces for its record; a tag read_latest_tag returns is one of the two files' tags.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/engine_format/internal/latest_pointer.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::checkpoint;
  if (size < 1) return 0;
  const size_t latest_len = data[0];
  const uint8_t* latest = data + 1;
  const size_t latest_bytes = latest_len == 0 ? 0 : std::min(latest_len - 1, size - 1);
  const uint8_t* record = latest + latest_bytes;
  const size_t record_bytes = size - 1 - latest_bytes;
  const std::string text(reinterpret_cast<const char*>(record), record_bytes);

  auto parsed = parse_latest_record(text, kLatestChecksumFile);
  if (parsed.ok() && latest_record_text(*parsed) != text) __builtin_trap();  // only the exact text

  const std::string dir = tierzero::fuzz::scratch_dir() + "/pointer";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  if (latest_len > 0) tierzero::fuzz::write_input_file("pointer/latest", latest, latest_bytes);
  if (record_bytes > 0)
    tierzero::fuzz::write_input_file(std::string("pointer/") + kLatestChecksumFile, record, record_bytes);
  auto tag = read_latest_tag(dir);
  if (tag.ok() && parsed.ok() && *tag != parsed->tag) __builtin_trap();  // a checksummed pointer wins
  return 0;
}
