// TensorPrefetcher: pieces arrive in order with the source's values, and every piece lies inside
// the ring, also when regions fill it to its last byte and the next one wraps to its start.
#include "checkpoint/convert/internal/tensor_prefetcher.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace tierzero::checkpoint {
namespace {

// `count` fp32 tensors of `numel` elements; element j of tensor i is i * 1000 + j.
class CountingSource final : public ConsolidationSource {
 public:
  CountingSource(size_t count, int64_t numel) {
    for (size_t i = 0; i < count; ++i) {
      std::string name = "t";
      name += std::to_string(i);
      specs_.push_back({name, {numel}});
    }
  }
  const std::vector<TensorSpec>& tensors() const override { return specs_; }
  const std::vector<std::pair<std::string, std::string>>& aliases() const override { return aliases_; }
  std::string model_config_json() const override { return {}; }
  Status fill_fp32(size_t index, uint64_t first, std::span<float> out) override {
    for (size_t j = 0; j < out.size(); ++j) out[j] = static_cast<float>(index * 1000 + first + j);
    return {};
  }

 private:
  std::vector<TensorSpec> specs_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

// A ring of 4096 bytes takes exactly 64 pieces of 64 bytes; holding them all before recycling
// makes the reader fill it to the end, then wrap.
TEST(TensorPrefetcher, PiecesStayInsideTheRingWhenItFillsExactly) {
  CountingSource source(30, 48);  // 192 bytes each: three 64-byte pieces, 90 in all
  TensorPrefetcher prefetcher(source, 4096, 64);
  const std::byte* ring = nullptr;
  size_t held = 0;
  for (size_t i = 0; i < 30; ++i) {
    for (uint64_t first = 0; first < 48; first += 16) {
      Result<PrefetchedPiece> piece = prefetcher.next();
      ASSERT_OK(piece);
      if (ring == nullptr) ring = piece->data;  // the first piece starts the ring
      ASSERT_EQ(piece->index, i);
      ASSERT_EQ(piece->bytes, 64u);
      EXPECT_EQ(piece->last, first + 16 == 48);
      ASSERT_GE(piece->data, ring);
      ASSERT_LE(piece->data + piece->bytes, ring + 4096) << "tensor " << i << " piece at " << first;
      float values[16];
      std::memcpy(values, piece->data, sizeof(values));
      for (size_t j = 0; j < 16; ++j) ASSERT_EQ(values[j], static_cast<float>(i * 1000 + first + j));
      // Hold the first 64 pieces (the whole ring), then hand back one per piece taken.
      if (++held == 64 || held > 64) prefetcher.recycle();
    }
  }
}

}  // namespace
}  // namespace tierzero::checkpoint
