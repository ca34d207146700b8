// libFuzzer harness: a token file (engine/data/token_file.cpp), TZTOKENS or headerless. Byte 0
// picks the caller's dtype (none, uint16, uint32) and the sequence length (1-16); the rest is
// the file. Up to 8 samples, first and last, are read.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/data/token_data.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero::engine;
  if (size < 1) return 0;
  std::optional<TokenDtype> dtype;
  if (data[0] % 3 == 1) dtype = TokenDtype::kUint16;
  if (data[0] % 3 == 2) dtype = TokenDtype::kUint32;
  const int64_t seq_len = 1 + (data[0] >> 4);
  const std::string path = tierzero::fuzz::write_input_file("tokens.bin", data + 1, size - 1);
  auto source = open_token_file(path, seq_len, dtype);
  if (!source.ok()) return 0;
  std::vector<int64_t> ids(seq_len), targets(seq_len);
  const int64_t n = (*source)->size();
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, n - 4, n - 3, n - 2, n - 1, n}) {
    (void)(*source)->read(i, ids.data(), targets.data());
  }
  return 0;
}
