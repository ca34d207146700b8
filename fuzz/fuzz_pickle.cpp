// libFuzzer harness: the inert pickle reader (checkpoint/torch_format/pickle_reader.cpp) on
// arbitrary bytes; a parsed document is walked and every value described.
#include <cstddef>
#include <cstdint>
#include <span>

#include "checkpoint/torch_format/internal/pickle_reader.h"
#include "fuzz/value_walk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero;
  auto doc = checkpoint::parse_pickle(std::as_bytes(std::span(data, size)), "fuzz.pkl");
  if (!doc.ok()) return 0;
  fuzz::walk_values(doc->root(), [](const checkpoint::PyValue& v) {
    (void)v.describe();
    (void)v.get("fp32_flat_groups");
  });
  return 0;
}
