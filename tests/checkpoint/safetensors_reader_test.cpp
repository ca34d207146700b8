// The safetensors reader accepts a valid file and rejects one seeded corrupt file per class of
// corruption, each with its own message naming the file and the tensor.
#include "checkpoint/safetensors/safetensors.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tests/support/status_matchers.h"

namespace tierzero::checkpoint {
namespace {

using testing::ScratchDir;

// Bytes of a safetensors file with header `header` (dumped as is) and `data_bytes` data bytes.
std::vector<uint8_t> file_bytes(const std::string& header, const std::vector<uint8_t>& data, uint64_t declared_length) {
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(declared_length >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::vector<uint8_t> file_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  return file_bytes(header, data, header.size());
}

// A valid three-tensor file from a seeded generator: "a" F32 [2,3], "b" BF16 [4], "c" I64 [1].
struct ValidFile {
  nlohmann::ordered_json header;
  std::vector<uint8_t> data;
};

ValidFile make_valid(uint32_t seed) {
  ValidFile f;
  f.header["__metadata__"] = {{"format", "pt"}};
  f.header["a"] = {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}};
  f.header["b"] = {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {24, 32}}};
  f.header["c"] = {{"dtype", "I64"}, {"shape", {1}}, {"data_offsets", {32, 40}}};
  std::mt19937 rng(seed);
  for (int i = 0; i < 40; ++i) f.data.push_back(static_cast<uint8_t>(rng()));
  return f;
}

Status open_status(const std::string& path) { return SafetensorsFile::open(path).status(); }

void expect_rejected(const std::string& path, const std::vector<std::string>& parts) {
  const Status s = open_status(path);
  EXPECT_ERROR(s, ErrorCode::kCorrupt, path);
  for (const std::string& part : parts) EXPECT_ERROR(s, ErrorCode::kCorrupt, part);
}

TEST(SafetensorsReader, OpensAValidFileWithZeroCopyViews) {
  ScratchDir dir;
  ValidFile v = make_valid(1);
  testing::write_file(dir.file("ok.safetensors"), file_bytes(v.header.dump(), v.data));
  auto file = SafetensorsFile::open(dir.file("ok.safetensors"));
  ASSERT_OK(file);
  ASSERT_EQ((*file)->header().tensors.size(), 3u);
  EXPECT_EQ((*file)->header().metadata.at("format"), "pt");
  const SafetensorsTensorInfo* b = (*file)->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, ElementType::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{4}));
  auto bytes = (*file)->data(*b);
  ASSERT_EQ(bytes.size(), 8u);
  EXPECT_EQ(std::to_integer<uint8_t>(bytes[0]), v.data[24]);
  EXPECT_EQ((*file)->find("missing"), nullptr);
}

TEST(SafetensorsReader, AcceptsEmptyTensorsAndNoMetadata) {
  ScratchDir dir;
  nlohmann::json h;
  h["e"] = {{"dtype", "F16"}, {"shape", {0, 5}}, {"data_offsets", {0, 0}}};
  h["x"] = {{"dtype", "U8"}, {"shape", {3}}, {"data_offsets", {0, 3}}};
  testing::write_file(dir.file("e.safetensors"), file_bytes(h.dump(), {1, 2, 3}));
  EXPECT_OK(open_status(dir.file("e.safetensors")));
}

class SafetensorsCorruption : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::vector<uint8_t>& bytes) {
    testing::write_file(dir_.file(name), bytes);
    return dir_.file(name);
  }
  ScratchDir dir_;
  ValidFile v_ = make_valid(20261129);
};

TEST_F(SafetensorsCorruption, TruncatedFile) {
  expect_rejected(write("short.safetensors", {1, 2, 3}), {"shorter than the 8-byte header length"});
  auto whole = file_bytes(v_.header.dump(), v_.data);
  whole.resize(whole.size() - 5);  // data cut: the last tensor runs past the end
  expect_rejected(write("cut.safetensors", whole), {"tensor 'c'", "run past the end of the data section"});
}

TEST_F(SafetensorsCorruption, BadHeaderLength) {
  expect_rejected(write("huge.safetensors", file_bytes(v_.header.dump(), v_.data, 1ull << 40)),
                  {"header length 1099511627776 exceeds"});
}

TEST_F(SafetensorsCorruption, HeaderPastEndOfFile) {
  const std::string h = v_.header.dump();
  expect_rejected(write("past.safetensors", file_bytes(h, {}, h.size() + 1000)), {"runs past the end of the file"});
}

TEST_F(SafetensorsCorruption, InvalidJson) {
  std::string h = v_.header.dump();
  h[h.size() / 2] = '\x01';
  expect_rejected(write("json.safetensors", file_bytes(h, v_.data)), {"not valid JSON"});
}

TEST_F(SafetensorsCorruption, OverlappingOffsets) {
  v_.header["b"]["data_offsets"] = {20, 28};
  v_.header["c"]["data_offsets"] = {28, 36};
  expect_rejected(write("overlap.safetensors", file_bytes(v_.header.dump(), std::vector<uint8_t>(36))),
                  {"tensor 'b'", "overlap tensor 'a'"});
}

TEST_F(SafetensorsCorruption, OutOfRangeOffsets) {
  v_.header["c"]["data_offsets"] = {32, 4000};
  v_.header["c"]["shape"] = {496};
  expect_rejected(write("range.safetensors", file_bytes(v_.header.dump(), v_.data)),
                  {"tensor 'c'", "run past the end of the data section (40 bytes)"});
}

TEST_F(SafetensorsCorruption, GapBetweenTensors) {
  v_.header["c"]["data_offsets"] = {36, 44};
  auto data = v_.data;
  data.resize(44);
  expect_rejected(write("gap.safetensors", file_bytes(v_.header.dump(), data)),
                  {"tensor 'c'", "gap of 4 unclaimed bytes"});
}

TEST_F(SafetensorsCorruption, TrailingBytes) {
  auto data = v_.data;
  data.resize(48);
  expect_rejected(write("trail.safetensors", file_bytes(v_.header.dump(), data)), {"8 trailing bytes"});
}

TEST_F(SafetensorsCorruption, WrongDtypeSize) {
  v_.header["b"]["dtype"] = "F32";  // 4 x F32 = 16 bytes, the range holds 8
  expect_rejected(write("size.safetensors", file_bytes(v_.header.dump(), v_.data)),
                  {"tensor 'b'", "4 elements of F32 need 16 bytes", "hold 8"});
}

TEST_F(SafetensorsCorruption, UnknownDtype) {
  v_.header["a"]["dtype"] = "F24";
  expect_rejected(write("dtype.safetensors", file_bytes(v_.header.dump(), v_.data)),
                  {"tensor 'a'", "unknown dtype 'F24'"});
}

TEST_F(SafetensorsCorruption, ShapeOverflow) {
  v_.header["a"]["shape"] = {1ull << 40, 1ull << 40};
  expect_rejected(write("overflow.safetensors", file_bytes(v_.header.dump(), v_.data)),
                  {"tensor 'a'", "overflows 64 bits"});
}

TEST_F(SafetensorsCorruption, NegativeDimension) {
  v_.header["a"]["shape"] = {-2, -3};
  expect_rejected(write("negative.safetensors", file_bytes(v_.header.dump(), v_.data)),
                  {"tensor 'a'", "not a non-negative integer"});
}

TEST_F(SafetensorsCorruption, DuplicateNames) {
  std::string h = v_.header.dump();
  const std::string second = "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[32,40]}";
  h.insert(h.size() - 1, "," + second);  // "c" twice; nlohmann alone would keep the last silently
  expect_rejected(write("dup.safetensors", file_bytes(h, v_.data)), {"names 'c' twice"});
}

TEST_F(SafetensorsCorruption, MetadataNotStringToString) {
  v_.header["__metadata__"] = {{"format", 3}};
  expect_rejected(write("meta.safetensors", file_bytes(v_.header.dump(), v_.data)),
                  {"'__metadata__' entry 'format' is not a string"});
}

}  // namespace
}  // namespace tierzero::checkpoint
