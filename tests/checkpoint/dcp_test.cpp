// The PyTorch DCP reader against checkpoints torch 2.11 writes (dcp.save with 1 and 2 gloo ranks on
// CPU, tests/checkpoint/dcp/make_dcp_checkpoint.py) and torch's own consolidation of them
// (format_utils.dcp_to_torch_save), bit for bit; and one corrupt file per error class.
// Without torch the tests skip.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/dcp/dcp_source.h"
#include "checkpoint/safetensors/safetensors.h"
#include "tests/checkpoint/dcp_fixture.h"
#include "tests/checkpoint/test_util.h"
#include "tests/common/float16_reference.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

namespace fs = std::filesystem;

float widen(ElementType dtype, std::span<const std::byte> bytes, size_t i) {
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return dtype == ElementType::kBF16 ? reference::bf16_bits_to_float(h) : reference::f16_bits_to_float(h);
}

std::unique_ptr<SafetensorsFile> convert(ConsolidationSource& source, ElementType dtype, const std::string& out) {
  ConvertOptions options;
  options.dtype = dtype;
  options.progress = false;
  auto report = consolidate_to_safetensors(source, out, options);
  EXPECT_OK(report);
  auto file = SafetensorsFile::open(out + "/model.safetensors");
  EXPECT_OK(file);
  return file.ok() ? std::move(*file) : nullptr;
}

class DcpRanks : public ::testing::TestWithParam<int> {};

TEST_P(DcpRanks, Fp32AndBf16EqualDcpToTorchSave) {
  const testing::DcpFixture fx = testing::dcp_fixture(GetParam());
  ASSERT_TRUE(fx.error.empty()) << fx.error;
  if (fx.dir.empty()) GTEST_SKIP() << fx.skip;
  ASSERT_TRUE(is_dcp_checkpoint(fx.dir));
  auto ref = SafetensorsFile::open(fx.dir + "/ref.safetensors");
  ASSERT_OK(ref);
  auto source = open_dcp_checkpoint(fx.dir, "");
  ASSERT_OK(source);
  EXPECT_EQ((*source)->tensors().size(), (*ref)->header().tensors.size());
  testing::ScratchDir scratch;
  const auto fp32 = convert(**source, ElementType::kF32, scratch.file("fp32"));
  const auto bf16 = convert(**source, ElementType::kBF16, scratch.file("bf16"));
  ASSERT_NE(fp32, nullptr);
  ASSERT_NE(bf16, nullptr);
  for (const SafetensorsTensorInfo& want : (*ref)->header().tensors) {
    SCOPED_TRACE(want.name);
    const auto bytes = (*ref)->data(want);
    const SafetensorsTensorInfo* got = fp32->find(want.name);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->shape, want.shape);
    const auto ours = fp32->data(*got);
    if (is_integer_type(want.dtype) || want.dtype == ElementType::kF32) {
      EXPECT_EQ(got->dtype, want.dtype);
      ASSERT_EQ(ours.size(), bytes.size());
      EXPECT_EQ(0, std::memcmp(ours.data(), bytes.data(), bytes.size()));
      continue;
    }
    // 16-bit tensors: widened exactly in fp32; bf16 output of a bf16 tensor is its bytes.
    ASSERT_EQ(got->dtype, ElementType::kF32);
    ASSERT_EQ(ours.size(), bytes.size() * 2);
    for (size_t i = 0; i < bytes.size() / 2; ++i) {
      float f;
      std::memcpy(&f, ours.data() + 4 * i, 4);
      ASSERT_EQ(std::bit_cast<uint32_t>(f), std::bit_cast<uint32_t>(widen(want.dtype, bytes, i))) << i;
    }
    if (want.dtype == ElementType::kBF16) {
      const auto b = bf16->data(*bf16->find(want.name));
      ASSERT_EQ(b.size(), bytes.size());
      EXPECT_EQ(0, std::memcmp(b.data(), bytes.data(), bytes.size()));
    }
  }
}

TEST_P(DcpRanks, PrefixKeepsAndStripsTheModelTensors) {
  const testing::DcpFixture fx = testing::dcp_fixture(GetParam());
  ASSERT_TRUE(fx.error.empty()) << fx.error;
  if (fx.dir.empty()) GTEST_SKIP() << fx.skip;
  auto source = open_dcp_checkpoint(fx.dir, "model.");
  ASSERT_OK(source);
  ASSERT_EQ((*source)->tensors().size(), 6u);
  for (const TensorSpec& s : (*source)->tensors()) EXPECT_FALSE(s.name.starts_with("model.")) << s.name;
  const auto none = open_dcp_checkpoint(fx.dir, "nothing.");
  EXPECT_EQ(none.status().code(), ErrorCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(World, DcpRanks, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& p) { return "w" + std::to_string(p.param); });

}  // namespace
}  // namespace tierzero::checkpoint
