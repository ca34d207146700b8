// DeepSpeed import against the fixtures' own truth and against DeepSpeed's zero_to_fp32, bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <fstream>

#include "checkpoint/deepspeed/deepspeed_source.h"
#include "checkpoint/deepspeed/internal/deepspeed_files.h"
#include "tests/checkpoint/deepspeed_fixtures.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::deepspeed_fixtures;
using testing::kGoodFixtures;
using testing::StateDump;

#define TZ_SKIP_WITHOUT_FIXTURES()                      \
  do {                                                  \
    const auto& fx = deepspeed_fixtures();              \
    ASSERT_TRUE(fx.error.empty()) << fx.error;          \
    if (fx.dir.empty()) GTEST_SKIP() << fx.skip_reason; \
  } while (0)

std::string fixture_dir(const std::string& name) { return deepspeed_fixtures().dir + "/" + name; }

std::unique_ptr<ConsolidationSource> open_or_fail(const std::string& dir) {
  auto source = open_deepspeed_checkpoint(dir, "");
  if (!source.ok()) ADD_FAILURE() << source.status().to_string();
  return source.ok() ? std::move(source).value() : nullptr;
}

// Every name, shape, alias and fp32 bit of `source` equals `want`.
void expect_equal(ConsolidationSource& source, const StateDump& want) {
  const auto& specs = source.tensors();
  ASSERT_EQ(specs.size(), want.tensors.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& w = want.tensors[i];
    ASSERT_EQ(specs[i].name, w.name) << "tensor " << i;
    ASSERT_EQ(specs[i].shape, w.shape) << w.name;
    std::vector<float> got(w.values.size(), -1.0f);
    const Status s = source.read_fp32(i, got);
    ASSERT_OK(s);
    for (size_t j = 0; j < got.size(); ++j) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[j]), std::bit_cast<uint32_t>(w.values[j]))
          << w.name << " element " << j << ": " << got[j] << " vs " << w.values[j];
    }
    // The same values read in ranges of 7 elements, which cross every rank's piece boundary.
    std::vector<float> ranged(got.size(), -1.0f);
    for (size_t first = 0; first < ranged.size(); first += 7) {
      const size_t n = std::min<size_t>(7, ranged.size() - first);
      const Status r = source.read_fp32_range(i, first, std::span(ranged).subspan(first, n));
      ASSERT_OK(r) << w.name;
    }
    // (memcmp with an empty tensor's null data pointers is undefined: UBSan in the asan preset.)
    ASSERT_TRUE(got.empty() || std::memcmp(ranged.data(), got.data(), got.size() * sizeof(float)) == 0)
        << w.name << " read in ranges";
  }
  EXPECT_EQ(source.aliases(), want.aliases);
}

class DeepSpeedImport : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepSpeedImport, MatchesFixtureTruth) {
  TZ_SKIP_WITHOUT_FIXTURES();
  const std::string dir = fixture_dir(GetParam());
  auto source = open_or_fail(dir);
  ASSERT_NE(source, nullptr);
  expect_equal(*source, testing::read_state_dump(dir, "truth"));
}

TEST_P(DeepSpeedImport, MatchesDeepSpeedZeroToFp32BitForBit) {
  TZ_SKIP_WITHOUT_FIXTURES();
  const auto& fx = deepspeed_fixtures();
  ASSERT_TRUE(fx.reference_error.empty()) << fx.reference_error;
  if (!fx.reference_skip.empty()) GTEST_SKIP() << fx.reference_skip;
  const std::string dir = fixture_dir(GetParam());
  auto source = open_or_fail(dir);
  ASSERT_NE(source, nullptr);
  expect_equal(*source, testing::read_state_dump(dir, "ref"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepSpeedImport, ::testing::ValuesIn(kGoodFixtures),
                         [](const auto& info) { return info.param; });

TEST(DeepSpeedImportApi, DetectsCheckpointFolders) {
  TZ_SKIP_WITHOUT_FIXTURES();
  EXPECT_TRUE(is_deepspeed_checkpoint(fixture_dir("s3_w2_fp16")));
  EXPECT_TRUE(is_deepspeed_checkpoint(fixture_dir("s2_w1_fp16")));
  EXPECT_FALSE(is_deepspeed_checkpoint(fixture_dir("s3_w2_fp16") + "/global_step3"));
  EXPECT_FALSE(is_deepspeed_checkpoint(deepspeed_fixtures().dir));
  EXPECT_FALSE(is_deepspeed_checkpoint("/nonexistent/tierzero"));
}

TEST(DeepSpeedImportApi, ExplicitTagAndConfig) {
  TZ_SKIP_WITHOUT_FIXTURES();
  const std::string dir = fixture_dir("s3_w3_bf16");
  auto source = open_deepspeed_checkpoint(dir, "global_step3");
  ASSERT_OK(source);
  EXPECT_NE((*source)->model_config_json().find("tie_word_embeddings"), std::string::npos);
  EXPECT_ERROR(open_deepspeed_checkpoint(dir, "global_step999"), ErrorCode::kNotFound, "global_step999");
}

TEST(DeepSpeedImportApi, ReadChecksIndexAndSpan) {
  TZ_SKIP_WITHOUT_FIXTURES();
  auto source = open_or_fail(fixture_dir("s2_w2_bf16"));
  ASSERT_NE(source, nullptr);
  std::vector<float> wrong(static_cast<size_t>(source->tensors()[0].numel()) + 1);
  EXPECT_EQ(source->read_fp32(0, wrong).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(source->read_fp32(source->tensors().size(), wrong).code(), ErrorCode::kInvalidArgument);
  const auto numel = static_cast<uint64_t>(source->tensors()[0].numel());
  std::vector<float> three(3);
  EXPECT_EQ(source->read_fp32_range(0, numel - 2, three).code(), ErrorCode::kInvalidArgument);  // past the end
  EXPECT_OK(source->read_fp32_range(0, numel - 3, three));
  EXPECT_OK(source->read_fp32_range(0, numel, std::span<float>()));
}

TEST(DeepSpeedImportApi, ReadsInAnyOrder) {
  TZ_SKIP_WITHOUT_FIXTURES();
  const std::string dir = fixture_dir("s3_w8_fp16");
  auto source = open_or_fail(dir);
  ASSERT_NE(source, nullptr);
  const StateDump truth = testing::read_state_dump(dir, "truth");
  for (size_t i = source->tensors().size(); i-- > 0;) {
    std::vector<float> got(truth.tensors[i].values.size());
    ASSERT_OK(source->read_fp32(i, got));
    EXPECT_EQ(0, std::memcmp(got.data(), truth.tensors[i].values.data(), got.size() * sizeof(float)))
        << truth.tensors[i].name;
  }
}

TEST(DeepSpeedImportApi, NaturalOrderAsZeroToFp32) {
  EXPECT_TRUE(natural_less("zero_pp_rank_2_mp_rank_00", "zero_pp_rank_10_mp_rank_00"));
  EXPECT_FALSE(natural_less("zero_pp_rank_10_mp_rank_00", "zero_pp_rank_2_mp_rank_00"));
  EXPECT_TRUE(natural_less("bf16_zero_pp_rank_9_x", "bf16_zero_pp_rank_11_x"));
  EXPECT_TRUE(natural_less("a", "a1"));
  EXPECT_FALSE(natural_less("rank_007", "rank_7"));
}

}  // namespace
}  // namespace tierzero::checkpoint
