// The DeepSpeed source through the converter (the `tierzero convert` path): safetensors equal
// DeepSpeed's zero_to_fp32 bit for bit (fp32) or rounded to bf16, the integer buffer
// (model.position_ids, int64) copied with its dtype kept as zero_to_fp32 keeps it, tied weights
// written once, config.json carried over.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "checkpoint/convert/consolidate.h"
#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/safetensors/safetensors.h"
#include "tests/checkpoint/deepspeed_fixtures.h"
#include "tests/common/float16_reference.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::deepspeed_fixtures;

constexpr const char* kIntegerBuffer = "model.position_ids";  // int64 in every fixture

// Converts two fixtures to `dtype` and compares every tensor with zero_to_fp32's (or, without
// DeepSpeed, the generator's) values: floats rounded by `round`, the int64 buffer exactly.
void expect_converted(ElementType dtype, uint16_t (*round)(float)) {
  const auto& fx = deepspeed_fixtures();
  ASSERT_TRUE(fx.error.empty()) << fx.error;
  if (fx.dir.empty()) GTEST_SKIP() << fx.skip_reason;
  ASSERT_TRUE(fx.reference_error.empty()) << fx.reference_error;
  const std::string stem = fx.reference_skip.empty() ? "ref" : "truth";
  for (const std::string name : {"s3_w2_fp16", "s2_w3_fp16_nopad"}) {
    SCOPED_TRACE(name);
    const std::string dir = fx.dir + "/" + name;
    auto source = open_deepspeed_checkpoint(dir, "");
    ASSERT_OK(source);
    test_support::ScratchDir out{"tierzero-ds-test"};
    ConvertOptions options;
    options.dtype = dtype;
    options.progress = false;
    const std::string out_dir = out.path() + "/model";
    auto report = consolidate_to_safetensors(**source, out_dir, options);
    ASSERT_OK(report);
    EXPECT_TRUE(std::filesystem::exists(out_dir + "/config.json"));

    auto file = SafetensorsFile::open(out_dir + "/model.safetensors");
    ASSERT_OK(file);
    const testing::StateDump want = testing::read_state_dump(dir, stem);
    EXPECT_EQ((*file)->header().tensors.size(), want.tensors.size());
    for (const auto& t : want.tensors) {
      const SafetensorsTensorInfo* info = (*file)->find(t.name);
      ASSERT_NE(info, nullptr) << t.name;
      EXPECT_EQ(info->shape, t.shape) << t.name;
      const auto bytes = (*file)->data(*info);
      if (t.name == kIntegerBuffer) {
        ASSERT_EQ(info->dtype, ElementType::kI64);
        ASSERT_EQ(bytes.size(), t.values.size() * sizeof(int64_t));
        for (size_t i = 0; i < t.values.size(); ++i) {
          int64_t v;
          std::memcpy(&v, bytes.data() + i * sizeof v, sizeof v);
          EXPECT_EQ(static_cast<float>(v), t.values[i]) << t.name << "[" << i << "]";
        }
        continue;
      }
      ASSERT_EQ(info->dtype, dtype) << t.name;
      if (dtype == ElementType::kF32) {
        ASSERT_EQ(bytes.size(), t.values.size() * sizeof(float)) << t.name;
        EXPECT_EQ(0, std::memcmp(bytes.data(), t.values.data(), bytes.size())) << t.name;
        continue;
      }
      ASSERT_EQ(bytes.size(), t.values.size() * 2) << t.name;
      for (size_t i = 0; i < t.values.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        ASSERT_EQ(h, round(t.values[i])) << t.name << "[" << i << "]";
      }
    }
    EXPECT_NE((*file)->find(kIntegerBuffer), nullptr);
    for (const auto& [alias, target] : want.aliases) EXPECT_EQ((*file)->find(alias), nullptr) << alias;
  }
}

TEST(DeepSpeedConvert, Fp32SafetensorsEqualZeroToFp32) { expect_converted(ElementType::kF32, nullptr); }

TEST(DeepSpeedConvert, Bf16RoundsFloatsAndKeepsTheIntegerBuffer) {
  expect_converted(ElementType::kBF16, reference::float_to_bf16_bits);
}

}  // namespace
}  // namespace tierzero::checkpoint
