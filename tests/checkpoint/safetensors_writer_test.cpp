// SafetensorsWriter output reads back through SafetensorsFile; shards follow transformers' rules.
#include <gtest/gtest.h>

#include <cstring>

#include <random>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors/safetensors.h"
#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::ScratchDir;

std::unique_ptr<nvme::IoEngine> make_engine() {
  auto engine = nvme::IoEngine::create(nvme::IoConfig{});
  EXPECT_OK(engine);
  return std::move(engine).value();
}

TEST(SafetensorsWriter, WritesWhatTheReaderReadsBack) {
  ScratchDir dir;
  auto engine = make_engine();
  // Odd sizes and small buffers, so appends straddle buffer boundaries and the tail is unaligned.
  const std::vector<TensorToWrite> tensors = {{"w", ElementType::kF32, {1000, 3}},
                                              {"h", ElementType::kBF16, {4097}},
                                              {"m", ElementType::kBool, {3}},
                                              {"e", ElementType::kF16, {0}},
                                              {"ids", ElementType::kI64, {5}}};
  std::mt19937 rng(5);
  std::vector<std::vector<std::byte>> payloads;
  for (const auto& t : tensors) {
    std::vector<std::byte> p(t.bytes().value());
    for (auto& b : p) b = static_cast<std::byte>(rng());
    payloads.push_back(std::move(p));
  }
  SafetensorsWriter::Options options{8192, 3};
  auto writer = SafetensorsWriter::create(*engine, dir.file("x.safetensors"), tensors, {{"format", "pt"}}, options);
  ASSERT_OK(writer);
  for (const auto& p : payloads) {
    for (size_t done = 0; done < p.size(); done += 777) {
      ASSERT_OK((*writer)->append(std::span(p).subspan(done, std::min<size_t>(777, p.size() - done))));
    }
  }
  ASSERT_OK((*writer)->finish());

  auto file = SafetensorsFile::open(dir.file("x.safetensors"));
  ASSERT_OK(file);
  EXPECT_EQ((*file)->header().metadata.at("format"), "pt");
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensorInfo* info = (*file)->find(tensors[i].name);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->dtype, tensors[i].dtype);
    EXPECT_EQ(info->shape, tensors[i].shape);
    auto data = (*file)->data(*info);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), payloads[i].begin(), payloads[i].end())) << tensors[i].name;
  }
  // The header is padded so the data section starts 8-byte aligned, as safetensors does.
  const auto raw = testing::read_file(dir.file("x.safetensors"));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | raw[i];
  EXPECT_EQ(n % 8, 0u);
}

TEST(SafetensorsWriter, RefusesMoreBytesThanDeclared) {
  ScratchDir dir;
  auto engine = make_engine();
  auto writer = SafetensorsWriter::create(*engine, dir.file("y.safetensors"), {{"a", ElementType::kF32, {2}}}, {},
                                          SafetensorsWriter::Options{});
  ASSERT_OK(writer);
  std::vector<std::byte> twelve(12);
  Status s = (*writer)->append(twelve);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("more bytes appended than the header declares"), std::string::npos) << s.message();
}

// reserve() hands out at most what is still declared and what the staging buffer holds; the
// bytes committed in place read back like appended ones.
TEST(SafetensorsWriter, ReserveIsBoundedByTheDeclaredBytesAndTheBuffer) {
  ScratchDir dir;
  auto engine = make_engine();
  auto writer = SafetensorsWriter::create(*engine, dir.file("z.safetensors"), {{"a", ElementType::kU8, {5000}}}, {},
                                          SafetensorsWriter::Options{4096, 2});
  ASSERT_OK(writer);
  EXPECT_EQ((*writer)->reserve(5001).status().code(), ErrorCode::kInvalidArgument);
  std::vector<uint8_t> want(5000);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<uint8_t>(i * 7);
  size_t done = 0;
  while (done < want.size()) {
    auto span = (*writer)->reserve(want.size() - done);
    ASSERT_OK(span);
    ASSERT_FALSE(span->empty());
    ASSERT_LE(span->size(), 4096u);  // never past the staging buffer's end
    std::memcpy(span->data(), want.data() + done, span->size());
    ASSERT_OK((*writer)->commit(span->size()));
    done += span->size();
  }
  EXPECT_EQ((*writer)->commit(1).code(), ErrorCode::kInvalidArgument);
  ASSERT_OK((*writer)->finish());
  auto file = SafetensorsFile::open(dir.file("z.safetensors"));
  ASSERT_OK(file);
  const auto bytes = (*file)->data((*file)->header().tensors[0]);
  ASSERT_EQ(bytes.size(), want.size());
  EXPECT_EQ(0, std::memcmp(bytes.data(), want.data(), want.size()));
}

TEST(ShardPlan, SplitsLikeSavePretrained) {
  const std::vector<TensorToWrite> tensors = {{"a", ElementType::kF32, {10}},    // 40 bytes
                                              {"b", ElementType::kF32, {10}},    // 40
                                              {"c", ElementType::kF32, {50}},    // 200: over the limit, alone
                                              {"d", ElementType::kBF16, {10}}};  // 20
  auto plan = plan_shards(tensors, 100);
  ASSERT_OK(plan);
  ASSERT_EQ(plan->shards.size(), 3u);
  EXPECT_EQ(plan->shards[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(plan->shards[1], (std::vector<size_t>{2}));
  EXPECT_EQ(plan->shards[2], (std::vector<size_t>{3}));
  EXPECT_EQ(plan->file_names[1], "model-00002-of-00003.safetensors");
  EXPECT_EQ(plan->total_bytes, 300u);
  auto index = nlohmann::json::parse(build_safetensors_index(tensors, *plan));
  EXPECT_EQ(index["metadata"]["total_size"], 300);
  EXPECT_EQ(index["weight_map"]["c"], "model-00002-of-00003.safetensors");

  auto single = plan_shards(tensors, 1000);
  ASSERT_OK(single);
  EXPECT_EQ(single->file_names, (std::vector<std::string>{"model.safetensors"}));
  EXPECT_EQ(build_safetensors_index(tensors, *single), "");
}

}  // namespace
}  // namespace tierzero::checkpoint
