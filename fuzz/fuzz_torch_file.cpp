// libFuzzer harness: a torch.save file (zip + pickle + tensor rebuild,
// checkpoint/torch_format/torch_file.cpp). Every value of the pickle is offered to tensor();
// each tensor accepted has its first and last elements read as fp32 and its bytes copied when small.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "checkpoint/torch_format/torch_file.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/value_walk.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tierzero;
  const std::string path = fuzz::write_input_file("input.pt", data, size);
  auto file = checkpoint::TorchFile::open(path);
  if (!file.ok()) return 0;
  std::vector<float> values(16);
  std::vector<std::byte> bytes;
  fuzz::walk_values(file->root(), [&](const checkpoint::PyValue& v) {
    if (v.is(checkpoint::PyKind::kTuple) || v.is(checkpoint::PyKind::kList)) {
      (void)checkpoint::torch_shape(v, "shape");
    }
    if (!v.is(checkpoint::PyKind::kObject)) return;
    auto t = file->tensor(v, "tensor");
    if (!t.ok()) return;
    const uint64_t n = std::min<uint64_t>(t->numel, values.size());
    (void)file->read_fp32(*t, 0, std::span(values).first(n));
    (void)file->read_fp32(*t, t->numel - n, std::span(values).first(n));
    if (t->numel * element_size(t->dtype) <= 4096) {
      bytes.resize(t->numel * element_size(t->dtype));
      (void)file->read_bytes(*t, bytes);
    }
  });
  return 0;
}
