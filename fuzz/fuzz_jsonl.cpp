// libFuzzer harness: a JSONL training file (engine/data/jsonl_source.cpp). Byte 0 picks the
// sequence length (1-64); the rest is the file. Every sample (up to 64) is read.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/data/token_data.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::engine;
  if (size < 1) return 0;
  const int64_t seq_len = 1 + (data[0] & 63);
  const std::string path = tierzero::fuzz::write_input_file("data.jsonl", data + 1, size - 1);
  auto source = open_jsonl(path, seq_len);
  if (!source.ok()) return 0;
  std::vector<int64_t> ids(seq_len), targets(seq_len);
  for (int64_t i = 0; i < std::min<int64_t>((*source)->size() + 1, 64); ++i) {
    (void)(*source)->read(i, ids.data(), targets.data());
  }
  return 0;
}
